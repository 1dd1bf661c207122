"""Fuzzing the importers (BibTeX, ACL Anthology XML, JSON Lines) and timing every indexer regex.

Properties, for generated files and for real files from ../shared/data with seeded mutations
(truncation, deleted braces and quotes, random bytes, NUL, invalid UTF-8, huge fields, lost or
doubled lines):
- no exception escapes ``import_sources``;
- every problem names the file and a line inside it;
- good records still import: generated well-formed records, and every real record that ends
  before the first mutated byte.
The adversarial part runs each module-level regex of ``indexer/`` (found by introspection, so a
new one is covered automatically) and the text-cleaning functions over 100 KB inputs built to
make backtracking explode; a generous 2 s bound catches quadratic or exponential patterns.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import random
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citewise.indexer.importer import import_sources, iter_records
from citewise.indexer.records import ImportProblem, PaperRecord
from citewise.indexer.store import Store

from ..conftest import ACL_XML, ACM_DL, SHARED_DATA, require

FIGURES: Counter[str] = Counter()  # examples, files, records and problems seen (reported below)
FUZZ = settings(
    deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@pytest.fixture(scope="module", autouse=True)
def fuzz_figures(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the module's tests, one line in pytest's report says what the fuzzing ran (examples,
    files, records, problems), for the issue note. A report, not a test: it depends on no test
    order and passes nothing off as checked."""
    FIGURES.clear()
    yield
    plugins = request.config.pluginmanager
    reporter = plugins.get_plugin("terminalreporter")
    if reporter is None:  # absent under xdist workers or -p no:terminal
        return
    capture = plugins.get_plugin("capturemanager")  # a teardown's output is captured: let this line out
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        reporter.write_line(f"\nfuzz figures: {dict(sorted(FIGURES.items()))}")  # off the progress dots


def _import(path: Path, fmt: str | None = None) -> tuple[Store, object, int]:
    """Import one file into a fresh store; returns (store, stats, lines in the file)."""
    store = Store(path.with_suffix(".sqlite"))
    stats = import_sources(store, [path], fmt=fmt)  # must never raise
    lines = path.read_bytes().count(b"\n") + 1
    problems = stats.problems
    for problem in problems:
        assert isinstance(problem, ImportProblem)
        assert problem.source == str(path.resolve())
        assert 0 <= problem.line <= lines, f"{problem} is outside the file's {lines} lines"
        assert str(problem).startswith(f"{path.resolve()}:{problem.line}: ")
    FIGURES["records imported"] += stats.imported + stats.duplicates + stats.updated + stats.unchanged
    FIGURES["problems reported"] += len(problems)
    return store, stats, lines


# -- BibTeX ----------------------------------------------------------------------------------------

WORDS = [
    "neural",
    "ranking",
    "query",
    "retrieval",
    "graph",
    "citation",
    "model",
    "learning",
    "sparse",
    "dense",
    "evaluation",
    "feedback",
    "Über",
    "naïve",
    "Ωmega",
]
TEX_TOKENS = [
    "\\'e",
    '\\"{o}',
    "\\v{s}",
    "{\\ss}",
    "$\\alpha$",
    "\\emph{x}",
    "<sup>2</sup>",
    "&amp;",
    "--",
    "~",
    "{BERT}",
    "\\&",
    "\\%",
    "``q''",
    "\\url{http://x.y}",
    "é",
    "😀",
    "\u2028",
]
HOSTILE = [
    "@",
    "@article{",
    "@comment{",
    "@string{s = ",
    "@preamble{",
    "{",
    "}",
    '"',
    "=",
    ",",
    "\\",
    "#",
    "%",
    "\n",
    "\x00",
    "\ufeff",
    "\\'{",
    "author = ",
    "title = {",
    "and",
    " ",
    "\t",
    "@@",
    "}}}",
    "{{{",
]

words = st.lists(st.sampled_from(WORDS), min_size=3, max_size=8).map(" ".join)
balanced = st.recursive(
    st.lists(st.sampled_from(WORDS + TEX_TOKENS + [" ", ", ", ".", ":", "-", "(", ")"]), max_size=8).map(
        "".join
    ),
    lambda inner: st.lists(inner, max_size=3).map(lambda parts: "{" + "".join(parts) + "}"),
    max_leaves=6,
)
garbage = st.lists(st.sampled_from(HOSTILE) | st.text(max_size=6), max_size=30).map("".join)


@st.composite
def bib_entry(draw, i: int) -> tuple[str, str]:
    """A well-formed entry with key ``good<i>`` and hostile but balanced field values."""
    etype = draw(st.sampled_from(["article", "inproceedings", "ARTICLE", "misc", "book", "phdthesis"]))
    fields = {"title": f"{draw(words)} {i}"}
    for name in draw(
        st.lists(
            st.sampled_from(
                [
                    "author",
                    "abstract",
                    "year",
                    "doi",
                    "journal",
                    "booktitle",
                    "keywords",
                    "month",
                    "pages",
                    "note",
                    "url",
                    "eprint",
                ]
            ),
            unique=True,
            max_size=6,
        )
    ):
        fields[name] = draw(balanced)
    body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields.items())
    return f"good{i}", f"@{etype}{{good{i},\n{body}\n}}\n"


@st.composite
def bib_document(draw) -> tuple[str, list[str]]:
    """Good entries with junk between them (comments without ``@``) and hostile text at the end."""
    parts: list[str] = []
    keys: list[str] = []
    for i in range(draw(st.integers(0, 6))):
        key, text = draw(bib_entry(i))
        keys.append(key)
        parts.append(text)
        parts.append(draw(st.sampled_from(["", "\n", "% a comment\n", "junk text outside entries\n"])))
    parts.append(draw(garbage))
    return "".join(parts), keys


@FUZZ
@given(bib_document())
def test_generated_bibtex_never_raises_and_good_entries_import(doc: tuple[str, list[str]]) -> None:
    text, keys = doc
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lib.bib"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        store, stats, _ = _import(path)
        missing = [k for k in keys if store.find(key=k) is None]
        assert not missing, f"good entries lost: {missing}"
        store.close()
    FIGURES["bibtex generated"] += 1


# -- ACL Anthology XML -----------------------------------------------------------------------------

xml_text = st.text(max_size=20).map(
    lambda s: escape("".join(c for c in s if c.isprintable() and c != "\ud800"))
)
markup = st.lists(
    xml_text
    | st.sampled_from(WORDS).map(lambda w: f"<fixed-case>{w}</fixed-case>")
    | st.lists(
        st.sampled_from(["\\frac{a}{b}", "\\alpha", "x^2", "{", "}", "\\", "\\mathcal{O}", " "]), max_size=6
    ).map(lambda t: f"<tex-math>{escape(''.join(t))}</tex-math>")
    | st.just("<url>https://x.org</url>"),
    max_size=5,
).map("".join)


@st.composite
def acl_document(draw) -> tuple[str, int]:
    """An Anthology-like collection (ids old and new style, odd years and ids); returns (xml, papers)."""
    collection = draw(st.sampled_from(["P18", "W19", "J74", "2020.acl", "2019.tacl", "X", "2²", "9999999.x"]))
    volumes = []
    papers = 0
    for _ in range(draw(st.integers(0, 3))):
        vid = draw(st.sampled_from(["1", "2", "main", "05", "x", "²"]))
        year = draw(st.sampled_from(["2020", "", "²⁰", "99999", "twenty"]))
        items = []
        for _ in range(draw(st.integers(0, 4))):
            pid = draw(st.sampled_from(["1", "2", "10", "x", "", "007"]))
            title = draw(markup)
            authors = "".join(
                f"<author><first>{draw(xml_text)}</first><last>{draw(xml_text)}</last></author>"
                for _ in range(draw(st.integers(0, 2)))
            )
            abstract = f"<abstract>{draw(markup)}</abstract>" if draw(st.booleans()) else ""
            items.append(
                f"<paper id={quoteattr(pid)}><title>{title}</title>{authors}{abstract}"
                f"<pages>{draw(xml_text)}</pages></paper>"
            )
            papers += 1
        meta = f"<meta><booktitle>{draw(markup)}</booktitle><year>{year}</year></meta>"
        volumes.append(f"<volume id={quoteattr(vid)}>{meta}{''.join(items)}</volume>")
    xml = f'<?xml version="1.0" encoding="UTF-8"?>\n<collection id={quoteattr(collection)}>{"".join(volumes)}</collection>\n'
    return xml, papers


@FUZZ
@given(acl_document())
def test_generated_acl_xml_yields_one_item_per_paper(doc: tuple[str, int]) -> None:
    xml, papers = doc
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "X.xml"
        path.write_text(xml, encoding="utf-8")
        items = list(iter_records(path, "acl-xml"))
        assert len(items) == papers  # each paper a record or a problem with its line, nothing else
        for item in items:
            if isinstance(item, PaperRecord):
                assert item.acl_id and item.source_line > 0
        store, stats, _ = _import(path, "acl-xml")
        assert stats.imported + stats.duplicates + stats.broken == papers
        store.close()
    FIGURES["acl-xml generated"] += 1


# -- JSON Lines -----------------------------------------------------------------------------------

json_leaf = st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | st.text(max_size=12)
json_value = st.recursive(
    json_leaf,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=8,
)
json_keys = st.sampled_from(
    [
        "title",
        "abstract",
        "authors",
        "author",
        "year",
        "doi",
        "ids",
        "venue",
        "journal",
        "type",
        "keywords",
        "references",
        "id",
        "pages",
        "publication_year",
    ]
)
good_json = st.builds(
    lambda t, a, y: {"title": t, "authors": a, "year": y},
    words,
    st.lists(st.sampled_from(["Smith, J.", "Doe, Ann", "Ng"]), max_size=3),
    st.integers(1900, 2030),
)
line = st.one_of(
    good_json.map(lambda o: ("good", o)),
    st.dictionaries(json_keys, json_value, max_size=6).map(lambda o: ("any", json.dumps(o).encode())),
    st.text(max_size=40).map(lambda s: ("any", s.encode("utf-8", "surrogatepass"))),
    st.binary(max_size=40).map(lambda b: ("any", b.replace(b"\n", b" "))),
)


@FUZZ
@given(st.lists(line, max_size=12))
def test_generated_jsonl_one_outcome_per_line(lines: list[tuple[str, bytes]]) -> None:
    goods: list[str] = []
    raws: list[bytes] = []
    for kind, value in lines:
        if kind == "good":  # a distinct id and title each (equal titles and years are one paper)
            goods.append(f"good{len(goods)}")
            value = json.dumps({**value, "id": goods[-1], "title": f"{value['title']} {len(goods)}"}).encode()
        raws.append(value)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "papers.jsonl"
        path.write_bytes(b"\n".join(raws) + b"\n")
        items = list(iter_records(path, "jsonl"))
        split = path.read_bytes().split(b"\n")
        split[0] = split[0].removeprefix(b"\xef\xbb\xbf")  # a BOM counts on the first line only
        assert len(items) == len([raw for raw in split if raw.strip()])
        store, stats, _ = _import(path, "jsonl")
        missing = [k for k in goods if store.find(key=k) is None]
        assert not missing, f"good records lost: {missing}"
        store.close()
    FIGURES["jsonl generated"] += 1


# -- mutated real files ------------------------------------------------------------------------------

MUTATIONS = (
    "truncate",
    "drop-brace",
    "drop-quote",
    "random-bytes",
    "nul",
    "invalid-utf8",
    "huge-field",
    "drop-line",
    "double-line",
)


def mutate(data: bytes, kind: str, rng: random.Random) -> tuple[bytes, int]:
    """One seeded mutation; returns the new bytes and the offset of the first changed byte."""
    pos = rng.randrange(max(len(data), 1))
    if kind == "truncate":
        return data[:pos], pos
    if kind in ("drop-brace", "drop-quote"):
        chars = b"{}<>" if kind == "drop-brace" else b"\"'"
        spots = [i for i, b in enumerate(data) if b in chars]
        if not spots:
            return data, len(data)
        pos = rng.choice(spots)
        return data[:pos] + data[pos + 1 :], pos
    if kind == "random-bytes":
        return data[:pos] + rng.randbytes(rng.randint(1, 64)) + data[pos:], pos
    if kind == "nul":
        return data[:pos] + b"\x00" + data[pos:], pos
    if kind == "invalid-utf8":
        return data[:pos] + b"\xff\xfe\xc3(" + data[pos:], pos
    if kind == "huge-field":
        return data[:pos] + b"A" * 2_000_000 + data[pos:], pos
    start = data.rfind(b"\n", 0, pos) + 1
    end = data.find(b"\n", pos)
    end = len(data) if end < 0 else end + 1
    if kind == "drop-line":
        return data[:start] + data[end:], start
    return data[:end] + data[start:end] + data[end:], end  # double-line


def _real_files() -> dict[str, list[Path]]:
    require(SHARED_DATA)
    rng = random.Random(15)
    bibs = sorted(p for p in require(ACM_DL).rglob("*.bib") if 15_000 < p.stat().st_size < 60_000)
    xmls = sorted(p for p in require(ACL_XML).glob("*.xml") if 15_000 < p.stat().st_size < 120_000)
    jsonl = require(SHARED_DATA / "citations" / "scisummnet-cited-papers.jsonl")
    return {"bibtex": rng.sample(bibs, 3), "acl-xml": rng.sample(xmls, 3), "jsonl": [jsonl]}


def _keys_before(path: Path, fmt: str, data: bytes, offset: int) -> list[str]:
    """Keys of the original records that end before ``offset`` (the next one starts before it)."""
    cut_line = data[:offset].count(b"\n") + 1
    recs = [r for r in iter_records(path, fmt) if isinstance(r, PaperRecord)]
    starts = [r.source_line for r in recs] + [10**9]
    return [r.key for r, nxt in zip(recs, starts[1:], strict=False) if r.key and nxt < cut_line]


@pytest.fixture(scope="module")
def real_files() -> dict[str, list[Path]]:
    return _real_files()


@pytest.mark.parametrize("fmt", ["bibtex", "acl-xml", "jsonl"])
@settings(
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1), kinds=st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3))
def test_mutated_real_files(real_files, fmt: str, seed: int, kinds: list[str]) -> None:
    rng = random.Random(seed)
    original = rng.choice(real_files[fmt])
    data = original.read_bytes()
    if fmt == "jsonl":
        data = b"".join(data.splitlines(keepends=True)[:150])
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / f"original{original.suffix}"
        source.write_bytes(data)
        mutated, first = data, len(data)
        for kind in kinds:
            mutated, at = mutate(mutated, kind, rng)
            first = min(first, at)
        path = Path(tmp) / f"mutated{original.suffix}"
        path.write_bytes(mutated)
        store, stats, _ = _import(path, fmt)
        expected = _keys_before(source, fmt, data, first)
        missing = [k for k in expected if store.find(key=k) is None]
        assert not missing, f"{kinds} at byte {first} of {original.name}: {len(missing)} earlier records lost"
        store.close()
    FIGURES[f"{fmt} mutated files"] += 1


# -- adversarial regex timing ----------------------------------------------------------------------

MODULES = (
    "bibtex",
    "jsonl",
    "acl_xml",
    "records",
    "bm25",
    "texclean",
    "store",
    "store_open",
    "index_files",
    "importer",
    "ann",
)
SIZE = 100_000
BOUND_S = 2.0  # generous: a linear scan of 100 KB takes milliseconds, a quadratic one minutes

UNITS = [
    "\\",
    "{",
    "}",
    "{}",
    " ",
    "\t \n",
    "arxiv:",
    "arxiv",
    "arXiv ",
    "0",
    "1.",
    "10.",
    "<a",
    "<",
    "</",
    "&",
    "$",
    "\\'{ ",
    "\\frac{",
    "\\href{",
    "\\textbf ",
    "a and ",
    " and",
    "v1",
    "-",
    "--",
    "a",
    "Number ",
    "Volume ",
    "doi:",
    "https://doi.org/",
    "é",
    "x ",
    "/",
    ":",
    "@",
    "\\u ",
    "{\\bf ",
    ".abc",
    "%2",
]


def adversarial_inputs() -> dict[str, str]:
    """100 KB strings: each unit repeated, and runs followed by the character that fails a match."""
    out = {f"{u!r}*": (u * (SIZE // len(u) + 1))[:SIZE] for u in UNITS}
    for head, run, tail in [
        ("a", " ", "b"),
        ("<a", " ", ""),
        ("\\'{", " ", "x"),
        ("10.", "1", " x"),
        ("arxiv:", "a", ""),
        ("\\frac{a}", " ", "x"),
        ("doi:", " ", "x"),
        ("", " ", "and"),
        ("\\href{", "x", ""),
        ("<a ", "=", ""),
        ("Volume", " ", "x"),
        ("v", "1", "x"),
    ]:
        out[f"{head!r}+{run!r}*+{tail!r}"] = head + run * (SIZE - len(head) - len(tail)) + tail
    return out


def indexer_patterns() -> dict[str, re.Pattern[str]]:
    found: dict[str, re.Pattern[str]] = {}
    for name in MODULES:
        module = importlib.import_module(f"citewise.indexer.{name}")
        for attr, value in vars(module).items():
            if isinstance(value, re.Pattern):
                found[f"{name}.{attr}"] = value
    return found


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def test_every_indexer_regex_is_linear_on_adversarial_input() -> None:
    patterns = indexer_patterns()
    assert {
        "texclean._HTML_TAG_RE",
        "bibtex._AND_RE",
        "bibtex._ARXIV_IN_TEXT",
        "jsonl._AND_SPLIT",
        "acl_xml._FRAC",
    } <= set(patterns)
    worst = (0.0, "", "")
    for pname, pattern in patterns.items():
        for iname, text in adversarial_inputs().items():
            for sample in (text, text + "!"):
                dt = _timed(lambda p=pattern, s=sample: (sum(1 for _ in p.finditer(s)), p.match(s)))
                assert dt < BOUND_S, f"{pname} took {dt:.1f} s on {iname}"
                worst = max(worst, (dt, pname, iname))
    print(f"\nworst regex scan of 100 KB: {worst[0] * 1000:.1f} ms ({worst[1]} on {worst[2]})")


def _functions() -> dict[str, Callable[[str], object]]:
    from citewise.indexer import acl_xml, bibtex, bm25, jsonl, records, texclean

    tokenizer = bm25.Tokenizer()
    return {
        "tex_to_unicode": texclean.tex_to_unicode,
        "strip_html": texclean.strip_html,
        "split_authors": bibtex.split_authors,
        "normalize_title": records.normalize_title,
        "normalize_doi": records.normalize_doi,
        "normalize_arxiv": records.normalize_arxiv,
        "tex_math_to_text": acl_xml.tex_math_to_text,
        "journal_fields": acl_xml._journal_fields,
        "bm25 tokenizer": tokenizer,
        "fts_or_query": bm25.fts_or_query,
        "jsonl record": lambda s: jsonl.record_from_json({"title": s, "authors": s, "year": s[:40]}, "x", 1),
        "bibtex file": lambda s: list(bibtex.iter_bibtex_text(s, "x")),
        "bibtex fields": lambda s: list(
            bibtex.iter_bibtex_text(
                "@article{k, title={T" + s + "}, author={" + s + "}, journal={" + s + "}}", "x"
            )
        ),
    }


def test_text_functions_are_linear_on_adversarial_input() -> None:
    worst = (0.0, "", "")
    for fname, fn in _functions().items():
        for iname, text in adversarial_inputs().items():
            try:
                dt = _timed(lambda f=fn, t=text: f(t))
            except Exception as exc:  # jsonl rejects some shapes: a RecordError is an answer, not a hang
                assert type(exc).__name__ == "RecordError", f"{fname} raised {exc!r} on {iname}"
                continue
            assert dt < BOUND_S, f"{fname} took {dt:.1f} s on {iname}"
            worst = max(worst, (dt, fname, iname))
    print(f"\nworst text function on 100 KB: {worst[0] * 1000:.1f} ms ({worst[1]} on {worst[2]})")
