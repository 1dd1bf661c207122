"""workspace/executeCommand end to end through the real server, on a small store the test writes:
``citewise.status``, ``citewise.suggestForDraft``, ``citewise.insertCitation`` and
``citewise.reindex`` (with ``window/workDoneProgress``, and cancelled through it).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from .lsp_harness import (
    INSERT,
    JSONL_PAPERS,
    LIBRARY,
    REINDEX,
    SUGGEST,
    Session,
    build_store,
    position,
    start,
    stop,
    write_jsonl,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

GLACIER_DRAFT = r"""\documentclass{article}
\title{Forecasting glacier melt}
\begin{document}
\begin{abstract}
We forecast the daily melt of alpine glaciers from temperature and radiation series.
\end{abstract}
Recurrent networks forecast glacier melt better than degree-day models of ablation.
Debris cover changes the surface energy balance of a glacier.
Our data come from a weather station next to the ice \cite{}.
\bibliography{refs}
\end{document}
"""
PENGUIN = "@article{ancel2024penguin,\n  title = {Huddling Thermodynamics of Emperor Penguin Colonies},\n  author = {Ancel, Andre},\n  year = {2024},\n  abstract = {Emperor penguins huddle to save energy in the antarctic winter.}\n}\n"
PENGUIN_TEXT = "\\documentclass{article}\n\\begin{document}\nEmperor penguins huddle in colonies to save energy in winter \\cite{}.\n\\end{document}\n"


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> list[Path]:
    """Copies of the sources, so a test can change one and reindex."""
    folder = tmp_path_factory.mktemp("sources")
    library = folder / "library.bib"
    shutil.copy(LIBRARY, library)
    return [library, write_jsonl(folder)]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp(tmp_path_factory, sources: list[Path]) -> Session:
    store = build_store(tmp_path_factory.mktemp("store"), sources)
    root = tmp_path_factory.mktemp("ws")
    session = await start(root, store, "visual-studio-code", options={"rerank": False})
    session.store = store  # type: ignore[attr-defined]
    yield session
    await stop(session)


async def test_status(lsp: Session) -> None:
    status = await lsp.status()
    assert status["ready"] is True
    assert status["papers"] == 22 + len(JSONL_PAPERS)
    assert Path(status["store"]) == lsp.store
    before = status["openDocuments"]
    lsp.open("status.tex", GLACIER_DRAFT)
    status = await lsp.status()
    assert status["openDocuments"] == before + 1
    assert status["reindexing"] is False
    assert isinstance(status["rssMB"], int | float) and status["rssMB"] > 0


async def test_suggest_for_draft_uses_the_text_and_the_citation_graph(lsp: Session) -> None:
    uri = lsp.open("suggest.tex", GLACIER_DRAFT)
    got = await lsp.command(SUGGEST, {"uri": uri, "k": 5})
    assert 1 <= len(got) <= 5
    titles = [s["title"] for s in got]
    glaciers = {p["title"] for p in JSONL_PAPERS[:3]}
    assert set(titles[:3]) == glaciers, titles
    by_title = {s["title"]: s for s in got}
    first = by_title["Glacier Melt Forecasting with Recurrent Neural Networks"]
    assert first["key"] == "okonkwo2021glacier" and first["year"] == 2021 and first["inBib"] is False
    assert isinstance(first["paperId"], int) and first["reasons"]
    # The papers the best matches cite join, saying so (W1 cites W2 and W3).
    assert any("cited by" in r for t in glaciers - {first["title"]} for r in by_title[t]["reasons"]), got
    assert len(await lsp.command(SUGGEST, {"uri": uri, "k": 2})) == 2


async def test_suggest_for_draft_leaves_out_what_the_draft_cites(lsp: Session) -> None:
    (lsp.root / "refs.bib").write_text(
        "@article{okonkwo2021glacier,\n  title = {Glacier Melt Forecasting with Recurrent Neural Networks},\n  year = 2021\n}\n"
    )
    uri = lsp.open("cites.tex", GLACIER_DRAFT.replace("\\cite{}", "\\cite{okonkwo2021glacier}"))

    async def ask() -> list[dict] | None:  # the .bib is indexed in the background
        got = await lsp.command(SUGGEST, {"uri": uri, "k": 10})
        return got if got and all(s["key"] != "okonkwo2021glacier" for s in got) else None

    got = await lsp.poll(ask, "the cited paper to be left out")
    assert "Degree-Day Models of Alpine Glacier Ablation" in [s["title"] for s in got]
    (lsp.root / "refs.bib").unlink()


async def test_insert_citation_puts_key_and_entry_in_through_apply_edit(lsp: Session) -> None:
    uri = lsp.open("insert.tex", GLACIER_DRAFT.replace("refs", "inserted"))
    item = (await lsp.complete(uri, "\\cite{")).items[0]
    paper_id = item.data["paperId"]
    pos = position(lsp.buffers[uri], "\\cite{")
    pending = (await lsp.status())["pendingEntries"]
    result = await lsp.command(
        INSERT,
        {
            "uri": uri,
            "paperId": paper_id,
            "range": {
                "start": {"line": pos.line, "character": pos.character},
                "end": {"line": pos.line, "character": pos.character},
            },
        },
    )
    assert result["applied"] is True
    assert f"\\cite{{{item.label}}}" in lsp.buffers[uri]
    (entry,) = [e for e in lsp.bib_edits if item.label in e]
    assert entry.lstrip().startswith(f"@article{{{item.label},")
    assert (lsp.root / "inserted.bib").exists()  # created for the edit (empty: the entry is unsaved)
    assert (await lsp.status())["pendingEntries"] == pending + 1
    again = await lsp.command(INSERT, {"uri": uri, "paperId": paper_id})
    assert again == {"applied": True, "key": item.label, "alreadyInBib": True}
    assert len([e for e in lsp.bib_edits if item.label in e]) == 1
    unknown = await lsp.command(INSERT, {"uri": uri, "paperId": 10**9})
    assert unknown["applied"] is False


async def test_reindex_imports_a_changed_source_with_progress(lsp: Session, sources: list[Path]) -> None:
    uri = lsp.open("penguin.tex", PENGUIN_TEXT)
    assert "ancel2024penguin" not in [i.label for i in (await lsp.complete(uri, "\\cite{")).items]
    sources[0].write_text(sources[0].read_text() + "\n" + PENGUIN)
    before = set(lsp.client.progress_reports)
    result = await lsp.command(REINDEX, {"force": False})
    assert result["done"] is True and result["cancelled"] is False
    assert result["imported"] == 1 and result["papers"] == 22 + len(JSONL_PAPERS) + 1
    (token,) = set(lsp.client.progress_reports) - before  # created with window/workDoneProgress/create
    reports = lsp.client.progress_reports[token]
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
    middle = [r for r in reports if isinstance(r, types.WorkDoneProgressReport)]
    assert middle and [r.percentage for r in middle] == sorted(r.percentage for r in middle)
    labels = [i.label for i in (await lsp.complete(uri, "\\cite{")).items]
    assert "ancel2024penguin" in labels[:2], labels  # the new index serves


async def test_reindex_is_cancelled_through_its_progress(lsp: Session) -> None:
    """Cancelling the progress stops the reindex between files; the old index keeps serving."""
    for n in range(4):  # workspace .bib files: a reindex imports them too
        (lsp.root / f"big{n}.bib").write_text(
            "".join(
                f"@article{{big{n}x{i},\n  title = {{Generated paper {n} {i} about walrus migration {i % 89}}},\n"
                f"  year = {{{1990 + i % 30}}}\n}}\n\n"
                for i in range(2500)
            )
        )
    before = set(lsp.client.progress_reports)
    reindex = asyncio.ensure_future(lsp.command(REINDEX, {"force": True}))

    def first_report() -> str | None:
        for token in set(lsp.client.progress_reports) - before:
            if any(isinstance(r, types.WorkDoneProgressReport) for r in lsp.client.progress_reports[token]):
                return token
        return None

    token = await lsp.wait_for(first_report, "the first progress report")
    assert (await lsp.command(REINDEX, {})) == {"done": False, "reason": "a reindex is already running"}
    assert (await lsp.status())["reindexing"] is True
    lsp.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    result = await reindex
    assert result["done"] is False and result["cancelled"] is True, result
    end = lsp.client.progress_reports[token][-1]
    assert isinstance(end, types.WorkDoneProgressEnd) and end.message == "cancelled"
    assert (await lsp.status())["reindexing"] is False
    uri = lsp.open(
        "walrus.tex",
        "\\documentclass{article}\n\\begin{document}\nWalrus migration \\cite{}.\n\\end{document}\n",
    )
    labels = [i.label for i in (await lsp.complete(uri, "\\cite{")).items]
    assert not any(label.startswith("big") for label in labels), labels  # not swapped in
