"""Property tests: every public draft function takes any text without raising, and every offset
it returns lies inside that text (the LSP layer converts them blindly)."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citewise.server.bibfiles import bib_keys
from citewise.server.draft import (
    LANGS,
    LineIndex,
    citation_at,
    find_citations,
    global_context,
    language_for,
    local_context,
    placeholders,
)
from citewise.server.draft import bibliography_files as bib_files

# fmt: off
TOKENS = [
    "\\cite", "\\citep", "\\Textcite", "\\parencites", "\\cites", "\\cite*", "\\nocite", "\\cite<>", "<", ">",
    "{", "}", "[", "]", "(", ")", ",", ";", "@", "-@", "[@", "@{", "?", "??", "TODO", "XXX", "%", "\\%",
    "\\\\", "\\", "\n", "\n\n", "\r\n", "\r", " ", "\t", "$", "`", "```", "~~~", "---\n", "...\n", "<!--", "-->",
    "\\begin{verbatim}", "\\end{verbatim}", "\\verb|", "|", "\\title", "\\begin{abstract}", "\\end{abstract}",
    "\\abstract", "\\input{", "\\include{", "\\import{", "\\bibliography{", "\\addbibresource[", "location=remote",
    "title: ", "abstract: |\n  ", "bibliography:\n  - ", "'", '"', "#", "# ", "## Abstract\n", "% ", "@fig-", "@sec:",
    "me@example.com", "smith2020Deep", "doe:2019:abc", "10.1145/3331184.3331211", "a", "b", "key", ".", ":",
    "/", "😀", "é", "\u2028", "\x00", "_", "*", "^[", "![", "](", "\\emph", "\\label", "\\thanks", "\\href",
    "@article{", "@string{",
]
# fmt: on

texts = st.one_of(
    st.lists(st.sampled_from(TOKENS), max_size=40).map("".join),
    st.text(alphabet=string.printable + "😀é\u2028", max_size=80),
    st.text(max_size=60),
)
langs = st.sampled_from(LANGS)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(text=texts, lang=langs)
def test_find_citations_offsets_and_keys(text: str, lang: str) -> None:
    cits = find_citations(text, lang)  # type: ignore[arg-type]
    assert [c.start for c in cits] == sorted(c.start for c in cits)
    for c in cits:
        assert 0 <= c.start < c.end <= len(text)
        assert c.lang == lang
        for gs, ge in c.groups:
            assert c.start <= gs < ge <= c.end
        for k in c.keys:
            assert c.start <= k.start <= k.end <= c.end
            assert text[k.start : k.end] == k.key
    assert find_citations(text, lang) == cits  # the cache returns the same answer  # type: ignore[arg-type]


@FUZZ
@given(text=texts, lang=langs)
def test_citation_at_every_offset(text: str, lang: str) -> None:
    for off in range(len(text) + 1):
        cc = citation_at(text, off, lang)  # type: ignore[arg-type]
        if cc is None:
            continue
        assert cc.offset == off
        assert 0 <= cc.start <= off <= cc.end <= len(text)
        assert "\n" not in text[cc.start : cc.end] and "\r" not in text[cc.start : cc.end]
        assert cc.typed == text[cc.start : off]
        assert cc.filter_text("k").endswith("k")
        if cc.key_index is not None:
            assert 0 <= cc.key_index < len(cc.citation.keys)
        edited = text[: cc.start] + cc.replacement("smith2020") + text[cc.end :]
        find_citations(edited, lang)  # type: ignore[arg-type]


@FUZZ
@given(text=texts, lang=langs, size=st.integers(min_value=-5, max_value=300))
def test_placeholders_ranges(text: str, lang: str, size: int) -> None:
    cits = find_citations(text, lang)  # type: ignore[arg-type]
    for p in placeholders(text, lang, size=size):  # type: ignore[arg-type]
        assert p.citation in cits
        assert 0 <= p.start <= p.end <= len(text)
        assert p.citation.start <= p.start and p.end <= p.citation.end
        assert p.citation.keys[p.key_index].placeholder
        assert isinstance(p.context, str) and len(p.context) <= max(size, 0) + 1


@FUZZ
@given(text=texts, lang=langs, data=st.data(), size=st.integers(min_value=0, max_value=400))
def test_local_context_any_offset(text: str, lang: str, data: st.DataObject, size: int) -> None:
    off = data.draw(st.integers(min_value=-3, max_value=len(text) + 3))
    ctx = local_context(text, off, lang, size=size)  # type: ignore[arg-type]
    assert isinstance(ctx, str)
    assert len(ctx) <= size + 1
    assert ctx == ctx.strip()


@FUZZ
@given(
    main=texts, files=st.dictionaries(st.sampled_from(["a.tex", "b.tex", "a", "x/y.tex"]), texts), lang=langs
)
def test_global_context_and_bibliography(main: str, files: dict[str, str], lang: str) -> None:
    title, abstract = global_context(main, lang, files.get)  # type: ignore[arg-type]
    assert isinstance(title, str) and isinstance(abstract, str)
    names = bib_files(main, lang, files.get)  # type: ignore[arg-type]
    assert all(isinstance(n, str) and n for n in names)
    assert len(names) == len(set(names))


@FUZZ
@given(text=texts)
def test_line_index_round_trip(text: str) -> None:
    index = LineIndex(text)
    for off in range(len(text) + 1):
        line, char = index.position(off)
        assert 0 <= line < index.line_count and char >= 0
        if text[off - 1 : off + 1] != "\r\n":
            assert index.offset(line, char) == off


@FUZZ
@given(text=texts)
def test_bib_keys_lines(text: str) -> None:
    n_lines = text.count("\n") + 1
    for key, line in bib_keys(text).items():
        assert key and 0 <= line < n_lines


@FUZZ
@given(path=st.text(max_size=30), language_id=st.one_of(st.none(), st.text(max_size=10)))
def test_language_for_total(path: str, language_id: str | None) -> None:
    assert language_for(path, language_id) in (None, "latex", "markdown")
