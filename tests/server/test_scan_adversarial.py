"""Adversarial inputs for every draft and ``.bib`` scanner: each 100 KB scan ends in bounded time.

The bound is generous on purpose (seconds, where a linear scan takes milliseconds): the test
exists to catch exponential and quadratic blow-ups such as the unclosed ``\\cite{`` before a
line of prose that once took 45 s for 22 characters, not to time anything. Timings belong to
``bench/bench_scan_adversarial.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citewise.indexer.braces import BraceIndex, closing_brace, pair_braces
from citewise.models.focus import focus_text, marked_query
from citewise.server import draft
from citewise.server.bibfiles import bib_keys
from citewise.server.bibindex import BibIndex

SIZE = 100_000
BOUND_S = 3.0

# Units repeated to 100 KB. Each targets a pattern a regex or a scanner loop could rescan.
UNITS: dict[str, str] = {
    "unclosed cite before prose": "weighting \\cite{\n" + "word " * 30 + "\n",
    "unclosed key then prose": "\\cite{smith\n" + "text " * 30,
    "unclosed cite, one long paragraph": "\\cite{a " + "b" * 50,
    "backslashes": "\\",
    "open braces": "{",
    "close braces": "}",
    "cite[ runs": "\\cite[",
    "cites( runs": "\\cites(",
    "cite< runs": "\\cite<",
    "nested cite groups": "{\\cite{",
    "cite with comment": "\\cite{a,%\n",
    "cite comma runs": "\\cite{a,",
    "spaces": " ",
    "percent": "%",
    "blank lines": "\n\n",
    "verb runs": "\\verb|",
    "verbatim begin": "\\begin{verbatim}",
    "input runs": "\\input{",
    "title runs": "\\title{",
    "bibliography runs": "\\bibliography{",
    "addbibresource runs": "\\addbibresource[",
    "at signs": "@",
    "open brackets": "[",
    "bracket at": "[@",
    "minus at": "-@",
    "semicolons in brackets": "[@a; ",
    "dots": ". ",
    "hashes": "#",
    "backticks": "`",
    "link runs": "[a](",
    "html comment": "<!--",
    "placeholder runs": "\\cite{?}",
    "bib entry starts": "@a{k,",
    "bib unclosed field": "@article{k,\n title = {",
    "bib field names": "doi = ",
    "bib quotes": '@a{k, title = "',
}

# Whole documents: one long structure rather than a repeated unit.
DOCUMENTS: dict[str, str] = {
    "front matter line of spaces": "---\ntitle: a" + " " * SIZE + "b\n---\n",
    "heading of spaces": "# a" + " " * SIZE + "b\n",
    "heading of closing hashes": "# a" + " #" * (SIZE // 2) + "b\n",
    "deep nesting": "\\cite{" + "{" * SIZE,
    "deep nesting closed": "{" * (SIZE // 2) + "}" * (SIZE // 2),
    "one 100 KB line": "We cite \\cite{" + "x" * SIZE,
}


def adversarial_texts() -> Iterator[tuple[str, str]]:
    for name, unit in UNITS.items():
        yield name, (unit * (SIZE // len(unit) + 1))[:SIZE]
    yield from DOCUMENTS.items()


def scanners(text: str) -> Iterator[tuple[str, Callable[[], object]]]:
    """Every scan the server runs on a draft or a bibliography text, by name."""
    mid, end = len(text) // 2, len(text)
    for lang in ("latex", "markdown"):
        yield f"{lang} find_citations", lambda lang=lang: draft.find_citations(text, lang)
        yield f"{lang} citation_at", lambda lang=lang: [draft.citation_at(text, o, lang) for o in (mid, end)]
        yield f"{lang} placeholders", lambda lang=lang: draft.placeholders(text, lang)
        yield (  # issue 16: each placeholder's own words, as the prefetch reads them
            f"{lang} placeholder segments",
            lambda lang=lang: [focus_text(marked_query(p.marked)) for p in draft.placeholders(text, lang)],
        )
        yield (
            f"{lang} local_context",
            lambda lang=lang: [draft.local_context(text, o, lang, 400) for o in (mid, end)],
        )
        yield f"{lang} global_context", lambda lang=lang: draft.global_context(text, lang, lambda _n: text)
        yield (
            f"{lang} bibliography_files",
            lambda lang=lang: draft.bibliography_files(text, lang, lambda _n: text),
        )
    yield "bib keys", lambda: bib_keys(text)
    yield "bib index", lambda: BibIndex.from_texts([("refs.bib", text)])
    yield "brace pairs", lambda: pair_braces(text)


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


CASES = [(name, scan) for name, text in adversarial_texts() for scan, _ in scanners(text)]


@pytest.mark.parametrize("name", sorted({n for n, _ in CASES}))
def test_every_scan_of_an_adversarial_100kb_input_is_bounded(name: str) -> None:
    text = dict(adversarial_texts())[name]
    slow = [(scan, round(t, 2)) for scan, fn in scanners(text) if (t := timed(fn)) > BOUND_S]
    assert not slow, f"{name}: super-linear scans {slow}"


@pytest.mark.parametrize("n", [14, 18, 22, 40, 400])
def test_half_typed_cite_at_line_end_before_prose(n: int) -> None:
    """The reported freeze: ``\\cite{`` at a line end, then a line of prose with no ``}``."""
    text = "we use tf-idf weighting \\cite{\n" + ("a" * n) + " more words follow here"
    assert timed(lambda: draft.find_citations(text, "latex")) < BOUND_S
    (cit,) = draft.find_citations(text, "latex")
    assert not cit.closed  # read as a list being typed, so completion still works there
    cur = draft.citation_at(text, text.index("{") + 1, "latex")
    assert cur is not None


def test_a_one_megabyte_line_is_scanned_in_bounded_time() -> None:
    text = ("Dense retrieval \\cite{a} and \\cite{" + "y" * 40 + " ") * (1_000_000 // 80)
    for scan, fn in scanners(text):
        assert timed(fn) < 10 * BOUND_S, scan


def test_brace_pairs_skip_escapes_and_leave_unclosed_out() -> None:
    text = r"{a\{b}{c{d}}{"
    assert pair_braces(text) == {0: 5, 8: 10, 6: 11}
    assert closing_brace(text, 6) == 11
    assert closing_brace(text, 12) is None
    assert BraceIndex(text).closing(6, limit=3) is None
    assert BraceIndex(text).closing(8) == 10


_PIECES = st.sampled_from(
    [
        "\\cite{",
        "\\cite[",
        "}",
        "{",
        "\n",
        "\n\n",
        " ",
        "word",
        ",",
        "%",
        "\\",
        "[@",
        "@",
        "]",
        ";",
        "#",
        "`",
        "?",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECES, min_size=1, max_size=60), st.integers(50, 400))
def test_random_mixtures_scan_in_bounded_time(pieces: list[str], repeat: int) -> None:
    text = "".join(pieces) * repeat
    for scan, fn in scanners(text):
        assert timed(fn) < BOUND_S, scan
