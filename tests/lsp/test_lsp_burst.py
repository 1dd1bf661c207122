"""A misbehaving client: a burst of edits and completions with cancellations, bad positions,
requests for documents never opened. The server answers only with results, cancellations or
``ContentModified``, keeps no growing backlog, and answers for the latest version.

``bench/bench_lsp_burst.py`` runs the same burst with 1,000 rounds and reports the figures.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.uris import from_fs_path
from pytest_lsp import LanguageClient

from ..lsp_harness import CONTENT_MODIFIED, REQUEST_CANCELLED, STATUS, Session, build_store, start, stop

ALLOWED = {REQUEST_CANCELLED, CONTENT_MODIFIED}
PROSE = [
    "Dense retrieval trains dual encoders with contrastive losses",
    "Graph indexes answer approximate nearest neighbour queries",
    "Reciprocal rank fusion merges the lists of several rankers",
    "Cross-encoders rerank the candidates of a first stage",
]


@dataclass
class BurstResult:
    rounds: int
    answered: int = 0
    cancelled: int = 0
    content_modified: int = 0
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    before: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)
    final_ok: bool = False

    def figures(self) -> dict:
        lat = sorted(self.latencies)
        p95 = lat[min(len(lat) - 1, int(0.95 * (len(lat) - 1)))] if lat else None
        return {
            "rounds": self.rounds,
            "requests": self.rounds + 3,
            "answered": self.answered,
            "cancelled": self.cancelled,
            "content_modified": self.content_modified,
            "errors": len(self.errors),
            "median_ms": round(1000 * statistics.median(lat), 1) if lat else None,
            "p95_ms": round(1000 * p95, 1) if p95 is not None else None,
            "rss_mb_before": self.before.get("rssMB"),
            "rss_mb_after": self.after.get("rssMB"),
            "backlog_after": {
                k: self.after.get(k) for k in ("pendingAnalyses", "viewTasks", "queuedRankings")
            },
            "final_answer_for_latest_version": self.final_ok,
        }


async def status(client: LanguageClient) -> dict:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(STATUS, []))


def _cite_position(text: str) -> types.Position:
    line = text.count("\n", 0, text.index("\\cite{"))
    return types.Position(line, len(text.split("\n")[line].split("\\cite{")[0]) + len("\\cite{"))


def _count_error(result: BurstResult, exc: JsonRpcException) -> None:
    code = getattr(exc, "code", None)
    if code == CONTENT_MODIFIED:
        result.content_modified += 1
    elif code == REQUEST_CANCELLED:
        result.cancelled += 1
    else:
        result.errors.append(f"{code}: {exc}")


async def _ask(session: Session, uri: str, result: BurstResult, msg_id: str, text: str, cancel: bool) -> None:
    """One completion for ``text``'s placeholder, sent at once; cancelled right after when asked."""
    started = time.monotonic()
    params = types.CompletionParams(types.TextDocumentIdentifier(uri), _cite_position(text))
    fut = session.send(types.TEXT_DOCUMENT_COMPLETION, params, msg_id=msg_id)  # sent now, before the cancel
    if cancel:  # as VS Code does when the user types on: $/cancelRequest
        session.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
    try:
        await fut
        result.answered += 1
        result.latencies.append(time.monotonic() - started)
    except asyncio.CancelledError:
        result.cancelled += 1
    except JsonRpcException as exc:
        _count_error(result, exc)


async def _odd_request(client: LanguageClient, result: BurstResult, uri: str, pos: types.Position) -> None:
    """A request a misbehaving client sends: it may be refused only with an allowed code."""
    try:
        await client.text_document_completion_async(
            types.CompletionParams(types.TextDocumentIdentifier(uri), pos)
        )
    except JsonRpcException as exc:
        if getattr(exc, "code", None) not in ALLOWED:
            result.errors.append(f"{exc}")


def _change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [types.TextDocumentContentChangeWholeDocument(text)],
        )
    )


async def _drained(client: LanguageClient) -> dict:
    """The server's status once its backlog is empty (polled, bounded): it must not keep growing."""
    t0 = time.monotonic()
    while True:
        after = await status(client)
        busy = after["viewTasks"] + after["pendingAnalyses"] + after["queuedRankings"]
        if busy == 0 or time.monotonic() - t0 > 30:
            return after
        await asyncio.sleep(0.05)


async def run_burst(root: Path, store: Path, rounds: int, cancel_every: int = 3) -> BurstResult:
    """Start a server, open a draft, then ``rounds`` times: change it and ask for completion
    without waiting; every ``cancel_every``-th request is cancelled by the client."""
    session = await start(root, store, options={"debounceMs": 50})
    client = session.client
    result = BurstResult(rounds)
    uri = from_fs_path(str(root / "draft.tex"))
    text = "\\title{Ranking}\n" + PROSE[0] + " \\cite{}.\n"
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "latex", 1, text))
    )
    result.before = await status(client)
    tasks = []
    for i in range(rounds):
        text = "\\title{Ranking}\n" + PROSE[i % len(PROSE)] + f" (round {i}) \\cite{{}}.\n"
        _change(client, uri, i + 2, text)
        cancel = i % cancel_every == cancel_every - 1
        tasks.append(asyncio.ensure_future(_ask(session, uri, result, f"burst-{i}", text, cancel)))
        if i % 50 == 49:
            await asyncio.sleep(0)  # a fast typist, not a flood that never yields
    # Bad requests: a document never opened, a position far out of range, a mid-surrogate one.
    await _odd_request(client, result, from_fs_path(str(root / "never-opened.tex")), types.Position(0, 0))
    await _odd_request(client, result, uri, types.Position(10**6, 10**6))
    await asyncio.gather(*tasks)
    emoji = "\\title{Ranking}\nEmoji 😀 dense retrieval \\cite{}.\n"
    _change(client, uri, rounds + 2, emoji)
    await _odd_request(client, result, uri, types.Position(1, 7))  # inside the emoji's surrogate pair
    pos = _cite_position(emoji)
    final = await client.text_document_completion_async(  # +1: the emoji is 2 UTF-16 units
        types.CompletionParams(types.TextDocumentIdentifier(uri), types.Position(pos.line, pos.character + 1))
    )
    result.final_ok = isinstance(final, types.CompletionList) and bool(final.items)
    result.after = await _drained(client)
    await stop(session)
    return result


@pytest.mark.asyncio
async def test_a_burst_of_edits_and_cancelled_completions(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    result = await run_burst(root, build_store(tmp_path), rounds=150)
    assert not result.errors, result.errors[:5]
    assert result.answered + result.cancelled + result.content_modified == result.rounds
    assert result.answered > 0 and result.final_ok
    after = result.after
    assert after["viewTasks"] == 0 and after["queuedRankings"] == 0 and after["pendingAnalyses"] == 0, after
