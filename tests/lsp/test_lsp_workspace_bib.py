"""A draft's bibliography belongs to its draft: opening one project in the editor changes nothing
that another project's ``citewise check`` says, nor what ``citewise search`` finds, while the
opened draft is still offered its own ``.bib`` entries, ranked by the sentence.

Two identical copies of a draft and its ``.bib`` (real SIGIR 2017 entries of ACM-CR, one of them
under a wrong year, a made-up one, one the store lacks), one editor session on the first with the
server's default settings, ``citewise check --enable not-in-store`` on the second before and after.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ..cli.test_check import DRAFT, bib_entries, check, json_rows
from ..lsp_harness import start, stop

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

MADE_UP = (
    "@inproceedings{smith2023hallucinated,\n author = {Smith, Jane},\n"
    " title = {Pointer Networks for Citation Span Prediction in Legal Opinions},\n"
    " booktitle = {Proceedings of Nowhere}, year = {2023}\n}\n"
)
SENTENCE = r"Pointer networks predict citation spans in legal opinions \cite{"
PROJECT_DRAFT = DRAFT.replace(
    r"\bibliography{refs}",
    SENTENCE + "}.\nSpans were predicted before \\cite{smith2023hallucinated}.\n\\bibliography{refs}",
)


@pytest.fixture()
def projects(tmp_path: Path, lsp_store: Path) -> tuple[Path, Path, Path]:
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    store = store_dir / lsp_store.name
    shutil.copy2(lsp_store, store)
    shutil.copytree(Path(f"{lsp_store}.bm25"), Path(f"{store}.bm25"))
    folders = []
    for name in ("proj", "paper"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "draft.tex").write_text(PROJECT_DRAFT, encoding="utf-8")
        (folder / "refs.bib").write_text("\n".join([*bib_entries(), MADE_UP]), encoding="utf-8")
        folders.append(folder)
    return folders[0], folders[1], store


def findings(folder: Path, store: Path) -> list[tuple]:
    proc = check("draft.tex", "--store", str(store), "--json", "--enable", "not-in-store", cwd=folder)
    assert proc.returncode in (0, 1), proc.stderr
    return sorted((r["line"], r["key"], r["code"], r["message"], r["suggested"]) for r in json_rows(proc))


def search(query: str, store: Path) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "citewise.cli", "search", query, "--store", str(store), "--json", "-k", "20"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    return [json.dumps(row) for row in json.loads(proc.stdout)]


def store_digest(store: Path) -> tuple:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return (
            conn.execute("SELECT count(*), max(updated_at) FROM papers").fetchone(),
            conn.execute("SELECT path FROM sources ORDER BY path").fetchall(),
        )
    finally:
        conn.close()


async def test_one_project_opened_changes_nothing_for_another(projects: tuple[Path, Path, Path]) -> None:
    proj, paper, store = projects
    before = findings(paper, store)
    codes = {(key, code) for _l, key, code, _m, _s in before}
    assert ("jiang2017diversify", "metadata-mismatch") in codes  # the wrong year
    assert ("smith2023hallucinated", "not-in-store") in codes  # the made-up entry
    digest = store_digest(store)

    # The server's own defaults (the harness's base options would turn the import off anyway).
    session = await start(proj, store, base_options={"debounceMs": 20, "rerank": False})
    try:
        uri = session.open("draft.tex", PROJECT_DRAFT)
        await session.wait_for(lambda: [p for p in session.publications if p.uri == uri], "the diagnostics")
        # The opened draft is offered its own made-up entry where its sentence asks for it.
        got = await session.complete_final(uri, SENTENCE)
        labels = [i.label for i in got.items]
        assert labels[:1] == ["smith2023hallucinated"], labels
    finally:
        await stop(session)

    assert store_digest(store) == digest  # nothing was written to the shared store
    assert findings(paper, store) == before
    assert not [
        row for row in search("pointer networks citation span prediction", store) if "smith2023" in row
    ]


async def test_a_new_user_without_a_store_is_told_how_to_fill_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new ``HOME`` (no store yet): the draft's own entries are ranked by the sentence, and the
    editor is told once, in the placeholder's diagnostic and on hover there, which command fills
    the store. Nothing is written to the workspace's ``.bib``."""
    root = tmp_path / "ws"
    root.mkdir()
    bib = "\n".join([COOKING, MADE_UP])
    (root / "refs.bib").write_text(bib, encoding="utf-8")
    text = (
        "\\documentclass{article}\n\\begin{document}\n"
        + SENTENCE
        + "}.\n\\bibliography{refs}\n\\end{document}\n"
    )
    monkeypatch.delenv("CITEWISE_STORE", raising=False)  # the server inherits this environment
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / ".local" / "share"))
    session = await start(root, None, base_options={"debounceMs": 20})
    try:
        uri = session.open("draft.tex", text)
        got = await session.complete(uri, SENTENCE)
        assert [i.label for i in got.items] == ["smith2023hallucinated"]  # by the sentence, not file order
        await session.wait_for(lambda: any("is empty" in m for m in session.shown()), "the message")
        assert len([m for m in session.shown() if "is empty" in m]) == 1
        assert any("citewise index" in m for m in session.shown())
        diags = await session.latest_diagnostics(uri)
        note = [d.message for d in diags if d.code == "placeholder"]
        assert note and "citewise index refs.bib" in note[0], note
        hover = await session.hover(uri, SENTENCE)
        assert hover is not None and "citewise index refs.bib" in hover.contents.value
    finally:
        await stop(session)
    assert (root / "refs.bib").read_text(encoding="utf-8") == bib


COOKING = """@misc{pasta2020,
  title = {Cooking Pasta with Tomatoes and Basil},
  author = {Rossi, Maria},
  year = {2020}
}
"""


async def test_what_the_server_rebuilds_it_saves(projects: tuple[Path, Path, Path]) -> None:
    """With the opt-in import on, the server imports the workspace's .bib, serves the delta at once
    and then saves the rebuilt search index beside the store: ``citewise info`` calls it up to
    date afterwards, so no command rebuilds it again."""
    proj, _paper, store = projects
    # BM25 alone: a store this small is otherwise embedded by the bi-encoder first (minutes here).
    options = {"importWorkspaceBibs": True, "rerank": False, "prefetch": "bm25"}
    session = await start(proj, store, options=options)
    try:
        await session.wait_for(
            lambda: any("search index is saved" in m.message for m in session.client.log_messages),
            "the saved index",
        )
    finally:
        await stop(session)
    proc = subprocess.run(
        [sys.executable, "-m", "citewise.cli", "info", "--store", str(store), "--json"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    index = json.loads(proc.stdout)["search_index"]
    assert index["up_to_date"] and index["state"] == "up to date", index
