"""Hover on a placeholder shows the words its suggestions are ranked by: in a sentence with three
citations, each placeholder's own clause (models/focus.py), through the real server; ``citewise
suggest`` prints and writes the same clause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from ..lsp_harness import Session, build_store, position, start, stop

SENTENCE = (
    "We embed papers with a network trained with triplet loss and hard negative mining \\citep{}, "
    "search them with a navigable small world graph index \\cite{}, and fuse the lists by their "
    "reciprocal ranks \\cite{?}."
)
TEXT = f"\\documentclass{{article}}\n\\begin{{document}}\n{SENTENCE}\n\\end{{document}}\n"
CLAUSES = {
    "\\citep{}": "We embed papers with a network trained with triplet loss and hard negative mining",
    "\\cite{}": "search them with a navigable small world graph index",
    "\\cite{?}": "fuse the lists by their reciprocal ranks",
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp(tmp_path_factory) -> Session:
    base = tmp_path_factory.mktemp("clause-hover")
    store = build_store(base / "store")
    root = base / "ws"
    root.mkdir()
    session = await start(root, store, "visual-studio-code")
    session.uri_tex = session.open("paper.tex", TEXT)  # type: ignore[attr-defined]
    yield session
    await stop(session)


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_on_each_placeholder_shows_its_own_clause(lsp: Session) -> None:
    text = lsp.buffers[lsp.uri_tex]
    for marker, clause in CLAUSES.items():
        i = text.index(marker) + len(marker) - 1  # inside the braces
        pos = position(text[:i] + "\0", "\0", after=False)
        got = await lsp.client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(lsp.uri_tex), pos)
        )
        assert got is not None and isinstance(got.contents, types.MarkupContent)
        assert got.contents.value == f"citewise ranks this placeholder by: \u201c{clause}\u201d"
    assert await lsp.hover(lsp.uri_tex, "We embed") is None  # outside citations: nothing


def test_suggest_prints_and_writes_each_placeholders_clause(tmp_path: Path, capsys) -> None:
    from citewise.cli import main

    store = build_store(tmp_path / "store")
    draft = tmp_path / "draft.tex"
    draft.write_text(TEXT)
    assert main(["suggest", str(draft), "--store", str(store), "--json", "-k", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(p["marker"], p["clause"]) for p in out["placeholders"]] == list(CLAUSES.items())
    assert [p["clauseAt"] for p in out["placeholders"]] == [len(c) for c in CLAUSES.values()]
    assert main(["suggest", str(draft), "--store", str(store), "-k", "2"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("draft.tex:")]
    assert [line.split("\u201c", 1)[1].rstrip("\u201d") for line in lines] == [
        "\u2026" + CLAUSES["\\citep{}"][-80:].lstrip(),
        CLAUSES["\\cite{}"],
        CLAUSES["\\cite{?}"],
    ]
