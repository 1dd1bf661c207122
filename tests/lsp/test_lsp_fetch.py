"""``citewise.fetchAround`` end to end through the real server: the store grown around the draft's
``.bib`` from the loopback replay of recorded Semantic Scholar and OpenAlex answers
(tests/fetch_replay.py; the server process inherits the base URLs from the test's environment),
with ``window/workDoneProgress`` begin/report/end; cancelled through its progress and by
``$/cancelRequest``, it leaves the store consistent, and the command again continues and ends
with the store an uninterrupted ``citewise fetch`` of the same ``.bib`` gives.

The recordings hold no lists for these three papers, nor their batch spelled by DOI: the lists
are the recorded pages of two real papers, and the batch answer the recorded papers whose DOI
was asked (``around_servers(by_doi=True)``).
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types

from ..fetch_replay import around_servers
from ..lsp_harness import TIMEOUT, Session, build_store, start, stop

pytestmark = pytest.mark.asyncio(loop_scope="module")

FETCH = "citewise.fetchAround"
REFS = """@article{bertrand2004trust,
  title = {How Much Should We Trust Differences-in-Differences Estimates?},
  author = {Bertrand, Marianne and Duflo, Esther and Mullainathan, Sendhil},
  year = {2004},
  doi = {10.2139/ssrn.288970}
}

@article{banerjee2015miracle,
  title = {The Miracle of Microfinance? Evidence from a Randomized Evaluation},
  author = {Banerjee, Abhijit and Duflo, Esther},
  year = {2015},
  doi = {10.2139/ssrn.2250500}
}

@article{duflo2023audits,
  title = {Improving Third-Party Audits and Regulatory Compliance in India},
  author = {Duflo, Esther},
  year = {2023},
  doi = {10.1257/rct.1355}
}
"""
DRAFT = r"""\documentclass{article}
\begin{document}
Randomized evaluations of microfinance \cite{banerjee2015miracle}.
\bibliography{refs}
\end{document}
"""
LIMIT = 300  # three pages of the recorded citing papers, both pages of the references


def _content(path: Path) -> tuple[list, list]:
    """The fetched papers and edges, read as another process would (integrity checked)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        papers = sorted(conn.execute("SELECT uid, title, abstract FROM papers").fetchall())
        edges = sorted(
            conn.execute("SELECT citing_ref, cited_ref, context, intents FROM citation_edges").fetchall()
        )
        return papers, edges
    finally:
        conn.close()


def _edge_rows(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM citation_edges").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


async def _begun(session: Session, before: set, pages: bool = True) -> str:
    """The token of the progress begun after ``before``, once it reports a page."""
    reports = session.client.progress_reports

    def reported() -> str | None:
        for token in set(reports) - before:
            if any(isinstance(r, types.WorkDoneProgressReport) for r in reports[token]) or not pages:
                return token
        return None

    return await session.wait_for(reported, "a progress report")


async def _cancel_midway(session: Session, uri: str, store: Path, how: str, n: int) -> None:
    """Run the command, cancel it once a page is in (``how``: ``progress`` or ``request``)."""
    before = set(session.client.progress_reports)
    request = session.send(
        types.WORKSPACE_EXECUTE_COMMAND,
        types.ExecuteCommandParams(command=FETCH, arguments=[{"uri": uri, "limit": LIMIT}]),
        msg_id=f"fetch-{n}",
    )
    token = await _begun(session, before)
    await session.wait_for(lambda: _edge_rows(store) > 0 or None, "a committed page")
    if how == "progress":
        session.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        result = await asyncio.wait_for(request, TIMEOUT)
        assert result["cancelled"] is True and result["done"] is False, result
        assert "run the same command again" in result["reason"]
    else:
        session.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=f"fetch-{n}"))
        with pytest.raises(Exception, match="cancel"):
            await asyncio.wait_for(request, TIMEOUT)
    ends = session.client.progress_reports[token]
    await session.wait_for(lambda: isinstance(ends[-1], types.WorkDoneProgressEnd), "progress end")
    assert ends[-1].message == "cancelled"
    await session.poll(lambda: _not_fetching(session), "the fetch to stop")


async def _not_fetching(session: Session) -> bool:
    return (await session.status())["fetching"] is False


async def test_fetch_around_the_drafts_bib_with_progress_and_cancellation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s2, oa = around_servers(delay=0.15, by_doi=True)
    with s2, oa:
        monkeypatch.setenv("CITEWISE_S2_URL", f"{s2.url}/graph/v1")
        monkeypatch.setenv("CITEWISE_OPENALEX_URL", oa.url)
        monkeypatch.setenv("CITEWISE_S2_KEY", "test-key")
        store = build_store(tmp_path / "store")
        pristine = tmp_path / "pristine.sqlite"
        shutil.copy(store, pristine)
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "refs.bib").write_text(REFS)
        session = await start(ws, store, options={"rerank": False, "prefetch": "bm25"})
        try:
            before_papers = (await session.status())["papers"]
            uri = session.open("draft.tex", DRAFT)
            await _cancel_midway(session, uri, store, "progress", 1)
            kept = _content(store)  # consistent: integrity checked, every edge in a committed page
            assert len(kept[1]) > 0
            await _cancel_midway(session, uri, store, "request", 2)
            assert len(_content(store)[1]) >= len(kept[1])
            asked = len(s2.requests)

            before = set(session.client.progress_reports)
            result = await asyncio.wait_for(session.command(FETCH, {"uri": uri, "limit": LIMIT}), TIMEOUT)
            assert result["done"] is True and result["resolved"] == 3, result
            assert result["bibs"] == [str(ws / "refs.bib")]
            assert result["papers"] > before_papers and (await session.status())["papers"] == result["papers"]
            (token,) = set(session.client.progress_reports) - before
            reports = session.client.progress_reports[token]
            assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
            assert isinstance(reports[-1], types.WorkDoneProgressEnd) and "papers" in reports[-1].message
            middle = [r for r in reports if isinstance(r, types.WorkDoneProgressReport)]
            assert middle and [r.percentage for r in middle] == sorted(r.percentage for r in middle)
            assert any("references and citing papers" in (r.message or "") for r in middle)
            # It continued: no list page committed before was asked again.
            pages = [p for _m, p, _b in s2.requests[asked:] if "/references" in p or "/citations" in p]
            assert len(pages) < 15, pages  # 3 papers x (2 + 3) pages in all

            again = await asyncio.wait_for(session.command(FETCH, {"uri": uri, "limit": LIMIT}), TIMEOUT)
            assert again["done"] is True and again["requests"] == 0 and again["papers_added"] == 0
        finally:
            await stop(session)

        # The same .bib fetched by the command line, uninterrupted, into the store as it was.
        s2.rewind()
        cli = [
            sys.executable, "-m", "citewise.cli", "fetch", "--around", str(ws / "refs.bib"),
            "--store", str(pristine), "--limit", str(LIMIT), "--no-search-index", "--no-embed", "-q", "--json",
        ]  # fmt: skip
        done = subprocess.run(cli, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert _content(store) == _content(pristine)


async def test_the_key_and_mailto_settings_are_what_the_command_asks_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``s2Key`` and ``mailto`` set: the Semantic Scholar requests carry that key (not the
    environment's), OpenAlex's that address; the result says where each came from, never the key."""
    s2, oa = around_servers(by_doi=True)
    with s2, oa:
        monkeypatch.setenv("CITEWISE_S2_URL", f"{s2.url}/graph/v1")
        monkeypatch.setenv("CITEWISE_OPENALEX_URL", oa.url)
        monkeypatch.setenv("CITEWISE_S2_KEY", "key-of-the-environment")
        monkeypatch.delenv("CITEWISE_MAILTO", raising=False)
        store = build_store(tmp_path / "store")
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "refs.bib").write_text(REFS)
        options = {
            "rerank": False,
            "prefetch": "bm25",
            "s2Key": "key-of-the-settings",
            "mailto": "me@example.org",
        }
        session = await start(ws, store, options=options)
        try:
            uri = session.open("draft.tex", DRAFT)
            result = await asyncio.wait_for(session.command(FETCH, {"uri": uri, "limit": 100}), TIMEOUT)
        finally:
            await stop(session)
        assert result["done"] is True and result["asked_as"] == {"s2_key": "setting", "mailto": "setting"}
        assert "key-of-the-settings" not in str(result)
        assert s2.keys and set(s2.keys) == {"key-of-the-settings"}
        assert oa.requests and all("mailto=me%40example.org" in p for _m, p, _b in oa.requests)
