"""workspace/executeCommand end to end through the real server, on a small store the test writes:
``citewise.status``, ``citewise.suggestForDraft``, ``citewise.insertCitation`` and
``citewise.reindex`` (with ``window/workDoneProgress``, and cancelled through it).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from ..lsp_harness import (
    ACM_DRAFT,
    INSERT,
    JSONL_PAPERS,
    LIBRARY,
    REINDEX,
    SUGGEST,
    TIMEOUT,
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


def copy_sources(folder: Path) -> list[Path]:
    """Copies of the sources in ``folder``, so a test can change one and reindex."""
    folder.mkdir(parents=True)
    library = folder / "library.bib"
    shutil.copy(LIBRARY, library)
    return [library, write_jsonl(folder)]


async def serve(base: Path, sources: list[Path]) -> Session:
    """A server on a store of ``sources`` built under ``base``, for the workspace ``base/ws``."""
    store = build_store(base / "store", sources)
    root = base / "ws"
    root.mkdir()
    session = await start(root, store, "visual-studio-code", options={"rerank": False})
    session.store = store  # type: ignore[attr-defined]
    return session


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp(tmp_path_factory) -> AsyncIterator[Session]:
    """The server the read-mostly tests share (each opens its own documents and .bib)."""
    base = tmp_path_factory.mktemp("commands")
    session = await serve(base, copy_sources(base / "sources"))
    yield session
    await stop(session)


@pytest.fixture
def sources(tmp_path: Path) -> list[Path]:
    """The sources of one reindexing test's store, which it changes."""
    return copy_sources(tmp_path / "sources")


@pytest_asyncio.fixture(loop_scope="module")
async def server(tmp_path: Path, sources: list[Path]) -> AsyncIterator[Session]:
    """A server of its own for a test that reindexes: on the shared server, the papers it adds and
    the .bib files it leaves in the workspace would change what later tests see (``test_status``
    counts the papers), so the module would pass only in file order."""
    session = await serve(tmp_path, sources)
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
    # A .bib of its own: another draft of the shared server with this entry in its .bib would see
    # the paper as inBib.
    (lsp.root / "cites.bib").write_text(
        "@article{okonkwo2021glacier,\n  title = {Glacier Melt Forecasting with Recurrent Neural Networks},\n  year = 2021\n}\n"
    )
    draft = GLACIER_DRAFT.replace("\\cite{}", "\\cite{okonkwo2021glacier}").replace("{refs}", "{cites}")
    uri = lsp.open("cites.tex", draft)

    async def ask() -> list[dict] | None:  # the .bib is indexed in the background
        got = await lsp.command(SUGGEST, {"uri": uri, "k": 10})
        return got if got and all(s["key"] != "okonkwo2021glacier" for s in got) else None

    got = await lsp.poll(ask, "the cited paper to be left out")
    assert "Degree-Day Models of Alpine Glacier Ablation" in [s["title"] for s in got]


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


async def test_reindex_imports_a_changed_source_with_progress(server: Session, sources: list[Path]) -> None:
    uri = server.open("penguin.tex", PENGUIN_TEXT)
    assert "ancel2024penguin" not in [i.label for i in (await server.complete(uri, "\\cite{")).items]
    sources[0].write_text(sources[0].read_text() + "\n" + PENGUIN)
    before = set(server.client.progress_reports)
    result = await server.command(REINDEX, {"force": False})
    assert result["done"] is True and result["cancelled"] is False
    assert result["imported"] == 1 and result["papers"] == 22 + len(JSONL_PAPERS) + 1
    (token,) = set(server.client.progress_reports) - before  # created with window/workDoneProgress/create
    reports = server.client.progress_reports[token]
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
    middle = [r for r in reports if isinstance(r, types.WorkDoneProgressReport)]
    assert middle and [r.percentage for r in middle] == sorted(r.percentage for r in middle)
    labels = [i.label for i in (await server.complete(uri, "\\cite{")).items]
    assert "ancel2024penguin" in labels[:2], labels  # the new index serves


async def test_reindex_is_cancelled_through_its_progress(server: Session) -> None:
    """Cancelling the progress stops the reindex between files; the old index keeps serving."""
    for n in range(4):  # workspace .bib files: a reindex imports them too
        (server.root / f"big{n}.bib").write_text(
            "".join(
                f"@article{{big{n}x{i},\n  title = {{Generated paper {n} {i} about walrus migration {i % 89}}},\n"
                f"  year = {{{1990 + i % 30}}}\n}}\n\n"
                for i in range(2500)
            )
        )
    before = set(server.client.progress_reports)
    reindex = asyncio.ensure_future(server.command(REINDEX, {"force": True}))

    def first_report() -> str | None:
        for token in set(server.client.progress_reports) - before:
            if any(
                isinstance(r, types.WorkDoneProgressReport) for r in server.client.progress_reports[token]
            ):
                return token
        return None

    token = await server.wait_for(first_report, "the first progress report")
    assert (await server.command(REINDEX, {})) == {"done": False, "reason": "a reindex is already running"}
    assert (await server.status())["reindexing"] is True
    server.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    result = await reindex
    assert result["done"] is False and result["cancelled"] is True, result
    end = server.client.progress_reports[token][-1]
    assert isinstance(end, types.WorkDoneProgressEnd) and end.message == "cancelled"
    assert (await server.status())["reindexing"] is False
    uri = server.open(
        "walrus.tex",
        "\\documentclass{article}\n\\begin{document}\nWalrus migration \\cite{}.\n\\end{document}\n",
    )
    labels = [i.label for i in (await server.complete(uri, "\\cite{")).items]
    assert not any(label.startswith("big") for label in labels), labels  # not swapped in


# -- on a real ACM-CR store ------------------------------------------------------------------------
# ~1,600 SIGIR and CHIIR papers from 10+ files (``lsp_store`` and the ``acm_*`` fixtures in
# conftest.py; skipped without ../shared/data): a reindex long enough to report and cancel.


@pytest.mark.slow
async def test_insert_command_appends_bib_entry(acm_lsp: Session) -> None:
    """The item's command makes the server send workspace/applyEdit appending the BibTeX entry."""
    (acm_lsp.root / "refs.bib").unlink()  # the .bib does not exist yet: it must be created
    uri = acm_lsp.open("draft.tex")
    _first, result = await acm_lsp.complete_until_full(uri, r"ad-hoc retrieval \cite{")
    item = result.items[0]
    out = await acm_lsp.command(item.command.command, *(item.command.arguments or []))
    assert out["applied"] is True
    assert len(acm_lsp.apply_requests) == 1
    edit = acm_lsp.apply_requests[0].edit
    bib_uri = acm_lsp.uri("refs.bib")
    if acm_lsp.caps == "visual-studio-code":
        creates = [c for c in edit.document_changes if isinstance(c, types.CreateFile)]
        assert creates and creates[0].uri == bib_uri
        texts = [
            e.new_text
            for c in edit.document_changes
            if isinstance(c, types.TextDocumentEdit)
            for e in c.edits
        ]
    else:  # no documentChanges: the server created the file, the edit is a plain change
        assert (acm_lsp.root / "refs.bib").exists()
        texts = [e.new_text for e in edit.changes[bib_uri]]
    assert len(texts) == 1 and texts[0].lstrip().startswith("@inproceedings{" + item.label + ",")


@pytest.mark.slow
async def test_suggest_for_draft_excludes_cited(acm_shared: Session) -> None:
    """suggestForDraft on real papers: reasons for each, nothing the draft already cites."""
    text = ACM_DRAFT.replace(r"\citep{foo2020, }", r"\citep{foo2020, 10.1145/3077136.3080832}")
    uri = acm_shared.open("suggest.tex", text)
    out = await acm_shared.command(SUGGEST, {"uri": uri, "k": 10})
    assert 5 <= len(out) <= 10
    assert all(s["reasons"] for s in out)
    assert "10.1145/3077136.3080832" not in {s["key"] for s in out}
    assert any("neural" in s["title"].lower() or "ranking" in s["title"].lower() for s in out[:5])


@pytest.mark.slow
async def test_reindex_reports_progress_and_keeps_serving(acm_vscode: Session) -> None:
    """A forced reindex of the real sources reports its progress; the old index serves meanwhile."""
    uri = acm_vscode.open("draft.tex")
    task = asyncio.ensure_future(acm_vscode.command(REINDEX, {"force": True}))
    during = await acm_vscode.complete(uri, r"ad-hoc retrieval \cite{")  # the old index serves meanwhile
    assert during.items
    result = await asyncio.wait_for(task, TIMEOUT)
    assert result["done"] is True and result["papers"] > 1000 and result["files"] >= 10
    reports = next(iter(acm_vscode.client.progress_reports.values()))
    kinds = [type(r).__name__ for r in reports]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    assert "WorkDoneProgressReport" in kinds and reports[0].cancellable
    _first, after = await acm_vscode.complete_until_full(uri, r"ad-hoc retrieval \cite{")
    assert after.items


@pytest.mark.slow
async def test_reindex_is_cancellable(acm_vscode: Session) -> None:
    """Cancelled from the progress UI (window/workDoneProgress/cancel) or by $/cancelRequest;
    either way the old index keeps serving and a later reindex can run."""
    uri = acm_vscode.open("draft.tex")
    reports = acm_vscode.client.progress_reports

    async def begun(n: int) -> str:
        await acm_vscode.wait_for(
            lambda: len(reports) >= n and reports[list(reports)[n - 1]], "progress begin"
        )
        return list(reports)[n - 1]

    task = asyncio.ensure_future(acm_vscode.command(REINDEX, {"force": True}))
    token = await begun(1)
    acm_vscode.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(task, TIMEOUT)
    assert result["done"] is False and result["cancelled"] is True and result["files"] < 10
    assert reports[token][-1].message == "cancelled"

    request = acm_vscode.send(
        types.WORKSPACE_EXECUTE_COMMAND,
        types.ExecuteCommandParams(command=REINDEX, arguments=[{"force": True}]),
        msg_id="reindex-2",
    )
    token = await begun(2)
    acm_vscode.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="reindex-2"))
    with pytest.raises(Exception, match="cancel"):
        await asyncio.wait_for(request, TIMEOUT)
    await acm_vscode.wait_for(
        lambda: isinstance(reports[token][-1], types.WorkDoneProgressEnd), "progress end"
    )
    result = await acm_vscode.complete(uri, r"ad-hoc retrieval \cite{")
    assert result.items  # the old index is still serving
    done = await asyncio.wait_for(acm_vscode.command(REINDEX, {}), TIMEOUT)
    assert done["done"] is True
