"""textDocument/hover and textDocument/definition end to end through the real server, on a small
store the test writes: a key in the .bib and the store, only in the .bib, only in the store,
nowhere; LaTeX and Markdown.
"""

from __future__ import annotations

import pytest
import pytest_asyncio
from lsprotocol import types

from ..lsp_harness import ACM_DRAFT, Session, build_store, position, start, stop

pytestmark = pytest.mark.asyncio(loop_scope="module")

REFS = """% my references
@inproceedings{karpukhin2020dense,
  title = {Dense Passage Retrieval for Open-Domain Question Answering},
  author = {Karpukhin, Vladimir},
  year = {2020}
}

@misc{mynotes2024,
  title = {Notes Nobody Else Has},
  author = {Me, Myself},
  year = {2024}
}
"""
TEXT = (
    "\\documentclass{article}\n\\begin{document}\n"
    "Both \\cite{karpukhin2020dense} and \\cite{mynotes2024}; the store has \\cite{nogueira2019passage};"
    " nobody has \\cite{nosuchkey2001}.\n\\bibliography{refs}\n\\end{document}\n"
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp(tmp_path_factory) -> Session:
    base = tmp_path_factory.mktemp("hover")
    store = build_store(base / "store", with_jsonl=True)
    root = base / "ws"
    root.mkdir()
    (root / "refs.bib").write_text(REFS)
    session = await start(root, store, "visual-studio-code")
    session.uri_tex = session.open("paper.tex", TEXT)  # type: ignore[attr-defined]
    yield session
    await stop(session)


async def hover_text(lsp: Session, uri: str, needle: str) -> str:
    """The hover markdown in the middle of ``needle`` (polled: the .bib is indexed in the background)."""

    async def ask() -> str | None:
        text = lsp.buffers[uri]
        i = text.index(needle) + len(needle) // 2
        pos = position(text[:i] + "\0", "\0", after=False)
        got = await lsp.client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), pos)
        )
        if got is None:
            return None
        assert (
            isinstance(got.contents, types.MarkupContent) and got.contents.kind == types.MarkupKind.Markdown
        )
        return got.contents.value

    return await lsp.poll(ask, f"a hover on {needle}")


async def test_hover_on_a_key_in_the_bib_and_the_store(lsp: Session) -> None:
    md = await hover_text(lsp, lsp.uri_tex, "karpukhin2020dense")
    assert "Dense Passage Retrieval for Open-Domain Question Answering" in md
    assert "Karpukhin" in md and "2020" in md and "EMNLP" in md  # venue from the store
    assert "dual encoder" in md  # the abstract


async def test_hover_on_a_key_only_in_the_bib(lsp: Session) -> None:
    md = await hover_text(lsp, lsp.uri_tex, "mynotes2024")
    line = REFS.split("\n").index("@misc{mynotes2024,") + 1
    assert f"refs.bib:{line}" in md and "not in the citewise store" in md, md


async def test_hover_on_a_key_only_in_the_store_and_on_an_unknown_key(lsp: Session) -> None:
    md = await hover_text(lsp, lsp.uri_tex, "nogueira2019passage")
    assert "Passage Re-ranking with BERT" in md and "Nogueira" in md and "cross-encoder" in md
    assert "arxiv.org/abs/1901.04085" in md  # the arXiv link
    md = await hover_text(lsp, lsp.uri_tex, "nosuchkey2001")
    assert "neither in the bibliography nor in the citewise store" in md


async def test_no_hover_outside_citations(lsp: Session) -> None:
    assert await lsp.hover(lsp.uri_tex, "Both") is None


async def test_definition_goes_to_the_entry_line(lsp: Session) -> None:
    await hover_text(lsp, lsp.uri_tex, "mynotes2024")  # the .bib is indexed
    refs = lsp.uri("refs.bib")
    for key in ("karpukhin2020dense", "mynotes2024"):
        loc = await lsp.definition(lsp.uri_tex, key[:5])
        assert isinstance(loc, types.Location), loc
        assert loc.uri == refs
        assert (
            REFS.split("\n")[loc.range.start.line].startswith("@")
            and key in REFS.split("\n")[loc.range.start.line]
        )
    assert await lsp.definition(lsp.uri_tex, "nogueira") is None  # not in the .bib: nowhere to go
    assert await lsp.definition(lsp.uri_tex, "nosuch") is None
    assert await lsp.definition(lsp.uri_tex, "Both") is None


async def test_markdown_hover_and_definition(lsp: Session) -> None:
    uri = lsp.open(
        "notes.md",
        "---\nbibliography: refs.bib\n---\n\nAs in [@mynotes2024] and [@nogueira2019passage].\n",
        "markdown",
    )
    assert "refs.bib" in await hover_text(lsp, uri, "mynotes2024")
    assert "Passage Re-ranking with BERT" in await hover_text(lsp, uri, "nogueira2019passage")
    loc = await lsp.definition(uri, "@mynotes")
    assert isinstance(loc, types.Location) and loc.uri == lsp.uri("refs.bib")
    assert "mynotes2024" in REFS.split("\n")[loc.range.start.line]


# -- on a real ACM-CR store ------------------------------------------------------------------------
# ~1,600 SIGIR and CHIIR papers (``lsp_store`` and the ``acm_*`` fixtures in conftest.py; skipped
# without ../shared/data): an ACM DOI key known only to the store, a key only in the .bib.


@pytest.mark.slow
async def test_hover_and_definition(acm_shared: Session) -> None:
    """Hover on a DOI key shows the store's paper with its link; definition and hover on a .bib
    key go to and show the user's entry."""
    text = ACM_DRAFT.replace(r"\citep{foo2020, }", r"\citep{foo2020, 10.1145/3077136.3080832}")
    uri = acm_shared.open("hover.tex", text)
    hover = await acm_shared.hover(uri, "10.1145/30771")
    md = hover.contents.value
    assert "Neural Ranking Models with Weak Supervision" in md and "2017" in md
    assert "https://doi.org/10.1145/3077136.3080832" in md and "Dehghani" in md
    loc = await acm_shared.definition(uri, r"\citep{foo2")
    assert (
        isinstance(loc, types.Location)
        and loc.uri == acm_shared.uri("refs.bib")
        and loc.range.start.line == 0
    )
    hover = await acm_shared.hover(uri, r"\citep{foo2")
    assert "Foo Paper" in hover.contents.value
