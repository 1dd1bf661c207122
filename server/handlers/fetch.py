"""workspace/executeCommand ``citewise.fetchAround``: build the field's store around the draft's
bibliography, the one thing the server ever asks the network for.

What it does: the papers of the draft's ``.bib`` files (argument ``uri``; else the workspace's
``.bib`` files, or the ``bibs`` given) are resolved on Semantic Scholar, their references and
citing papers fetched with their citing sentences, abstracts asked of OpenAlex, all into the
served store (``indexer/fetch/around.py``, as ``citewise fetch --around`` does, sharing its state
and cache: one continues the other); then a new recommender is swapped in as a reindex does.

Why a command and not automatic: nothing leaves the machine unless the user asks; the rest of
the server stays offline. The work runs in the index thread with ``window/workDoneProgress``
(begin, a report per page, end); cancelled through the progress or ``$/cancelRequest``, it stops
after the page in flight is committed, so the store stays consistent and running the command
again continues where it stopped. The Semantic Scholar key and the OpenAlex polite-pool address
come from the settings ``s2Key`` and ``mailto``, else from the server's environment
(``CITEWISE_S2_KEY``, ``CITEWISE_MAILTO``), as for the command line; the base URLs from the
environment (``CITEWISE_S2_URL``, ``CITEWISE_OPENALEX_URL``).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from citewise.indexer.fetch.around import (
    Endpoints,
    around,
    arxiv_of,
    cache_folder,
    clients,
    crossref_of,
    kept,
    seeds_of,
    stoppable_sleep,
    summary,
)
from citewise.indexer.fetch.http import FetchError
from citewise.indexer.fetch.openalex import ENV_MAILTO
from citewise.indexer.fetch.plan import Fetcher, Stopped
from citewise.indexer.fetch.s2 import ENV_KEY
from citewise.indexer.filter_seeds import LibraryError

from .. import jobs
from ..state import ReindexJob

if TYPE_CHECKING:
    from ..state import CitewiseServer

TITLE = "citewise: fetching around the bibliography"
DEFAULT_LIMIT = 500  # as `citewise fetch`: references and citing papers kept of each paper
# The share of the progress bar each fetch phase fills (the rebuild reports 80-100 itself).
SPANS = {
    "resolving papers": (0, 10),
    "references and citing papers": (10, 70),
    "preprints from arXiv": (70, 71),
    "references from Crossref": (71, 72),
    "abstracts from OpenAlex": (72, 80),
}


@dataclass
class FetchRequest:
    """The command's arguments, checked: the libraries, hops (1 or 2) and the limit of each list."""

    bibs: list[Path]
    hops: int = 1
    limit: int = DEFAULT_LIMIT
    retry_missing: bool = False


@dataclass
class _Phases:
    """``Fetcher.phase`` for the LSP: each phase reports ``label (done/total)`` over its span of
    :data:`SPANS`, percentages never going back (the second hop repeats a phase)."""

    report: jobs.Report
    floor: int = 0

    def __call__(self, label: str, unit: str, total: int | None) -> _Phase:
        return _Phase(self, label, unit, total)

    def emit(self, message: str, pct: int) -> None:
        self.floor = max(self.floor, min(100, pct))
        self.report(message, self.floor)


@dataclass
class _Phase:
    phases: _Phases
    label: str
    unit: str
    total: int | None
    done: int = 0

    def update(self, n: int = 1) -> None:
        self.done += n
        self.set_detail("")

    def set_detail(self, text: str) -> None:
        """Before each page: a report (the detail, offsets of S2 ids, means nothing in a status bar)."""
        start, end = SPANS.get(self.label, (self.phases.floor, self.phases.floor))
        share = min(1.0, self.done / self.total) if self.total else 0.0
        of = f"/{self.total:,}" if self.total else ""
        self.phases.emit(f"{self.label} ({self.done:,}{of}{self.unit})", start + int((end - start) * share))

    def close(self) -> None:
        pass


async def fetch_around(ls: CitewiseServer, args: dict) -> dict:
    """The command: checks, then the job in the index thread with cancellable progress."""
    if ls.ranker is None:
        return {"done": False, "reason": "store not loaded"}
    if ls.fetch_job is not None or ls.reindex_job is not None:
        return {"done": False, "reason": "a fetch or a reindex is already running"}
    request = await _request(ls, args)
    if isinstance(request, str):
        return {"done": False, "reason": request}
    job = ReindexJob(str(uuid.uuid4()), threading.Event())
    ls.fetch_job = job
    window = ls.client_capabilities.window
    progress = bool(window and window.work_done_progress)
    end = "failed"  # what the progress says at its end (an unexpected error: the store's own message)
    try:
        if progress:
            await ls.work_done_progress.create_async(job.token)
            begin = types.WorkDoneProgressBegin(title=TITLE, cancellable=True, percentage=0)
            ls.work_done_progress.begin(job.token, begin)
        report = jobs.progress_reporter(ls, job.token, progress, job.cancel)
        result = await ls.in_pool(ls.index_pool, _fetch_work, ls, job, report, request)
        end = _end_message(result)
        if result.get("error"):
            ls.show(f"citewise: {result['error']}", types.MessageType.Error)
        ls.bib_stamp += 1
        ls.reanalyse()
        return result
    except asyncio.CancelledError:  # $/cancelRequest: the job stops after the page in flight
        job.cancel.set()
        end = "cancelled"
        raise
    finally:
        if progress:
            ls.work_done_progress.end(job.token, types.WorkDoneProgressEnd(message=end))
        ls.fetch_job = None


async def _request(ls: CitewiseServer, args: dict) -> FetchRequest | str:
    """The checked arguments, or why there is nothing to fetch around."""
    hops, limit = args.get("hops", 1), args.get("limit", DEFAULT_LIMIT)
    if hops not in (1, 2) or not isinstance(limit, int) or limit < 1:
        return "hops must be 1 or 2 and limit a positive number"
    if isinstance(args.get("bibs"), list):
        bibs = [Path(str(b)).expanduser() for b in args["bibs"]]
    elif uri := (args.get("uri") or (args.get("textDocument") or {}).get("uri")):
        view = await ls.view(uri)
        if view is None:
            return f"unknown document {uri}"
        bibs = [Path(bf.path) for bf in view.bib_files]
    else:
        bibs = await ls.in_pool(ls.index_pool, jobs.workspace_bibs, ls.root)
    bibs = [b for b in bibs if b.is_file()]
    if not bibs:
        return "no .bib file to fetch around (the draft declares none that exists, nor does the workspace hold one)"
    return FetchRequest(bibs, hops, limit, bool(args.get("retryMissing")))


def _end_message(result: dict) -> str:
    if result.get("cancelled"):
        return "cancelled"
    if not result.get("done"):
        return str(result.get("error") or result.get("reason") or "failed")
    return f"{result.get('papers_added', 0):,} papers and {result.get('edges_added', 0):,} citations added"


def _fetch_work(ls: CitewiseServer, job: ReindexJob, report: jobs.Report, request: FetchRequest) -> dict:
    """Runs in the index thread: fetch into the served store, then build and swap a recommender
    when anything was added (as a reindex does; the old one serves until then)."""
    assert ls.ranker is not None
    store = ls.ranker.recommender.store
    if store.readonly:
        return {
            "done": False,
            "cancelled": False,
            "reason": f"the store cannot be written ({store.readonly_reason})",
        }
    try:
        seeds, unread = seeds_of(request.bibs)
    except LibraryError as exc:
        return {"done": False, "cancelled": False, "reason": str(exc)}
    endpoints, asked_as = _endpoints(ls)
    s2, oa = clients(endpoints, cache_folder(store.path), sleep=stoppable_sleep(job.cancel))
    crossref, preprints = crossref_of(endpoints, s2), arxiv_of(endpoints, s2)
    phases = _Phases(report)
    fetcher = Fetcher(
        store, s2, oa, request.limit, phases, stop=job.cancel.is_set, retry_missing=request.retry_missing
    )
    fetcher.crossref, fetcher.arxiv = crossref, preprints
    generation, t0 = store.generation, time.perf_counter()
    out: dict[str, Any] = {"done": True, "cancelled": False, "bibs": [str(b) for b in request.bibs]}
    out["asked_as"] = asked_as
    try:
        around(fetcher, seeds, request.hops)
    except Stopped:
        out.update(done=False, cancelled=True, reason=kept(fetcher))
    except FetchError as exc:
        out.update(done=False, error=f"{exc}; {kept(fetcher)}")
    out.update(summary(fetcher, store, time.perf_counter() - t0))
    out["problems"] = unread + out["problems"]
    if out["done"] and store.generation != generation:
        _swap_rebuilt(ls, job, phases.emit)
    out["papers"] = ls.store_papers = store.count()
    return out


def _endpoints(ls: CitewiseServer) -> tuple[Endpoints, dict[str, str]]:
    """The key and polite-pool address of the settings (``s2Key``, ``mailto``), each falling back
    to the server's environment (``CITEWISE_S2_KEY``, ``CITEWISE_MAILTO``), and where each came
    from (``setting``, ``environment``, ``none``; never the key itself), which the result shows so
    a user sees which key a fetch used."""
    settings = ls.settings
    asked_as = {}
    for name, value, env in (("s2_key", settings.s2_key, ENV_KEY), ("mailto", settings.mailto, ENV_MAILTO)):
        asked_as[name] = "setting" if value else ("environment" if os.environ.get(env) else "none")
    return Endpoints(s2_key=settings.s2_key or None, mailto=settings.mailto or None), asked_as


def _swap_rebuilt(ls: CitewiseServer, job: ReindexJob, report: jobs.Report) -> None:
    """A recommender over the grown store (embedding what the ranking uses), swapped in, then its
    search index saved beside the store, as :func:`jobs._reindex_work` does."""
    assert ls.ranker is not None
    store = ls.ranker.recommender.store
    result = jobs.refresh(
        store,
        [],
        rebuild=True,
        prefetch=ls.settings.prefetch,
        report=report,
        cancel=job.cancel,
        engine=ls.settings.engine,
    )
    if result.recommender is None:
        return  # cancelled while rebuilding: the fetched pages are kept, the old index serves
    result.recommender.prefetch_mode = ls.usable_prefetch(result.recommender)
    ls.ranker.swap(result.recommender)
    report("saving the search index", 97)
    fresh = jobs.saved_index_recommender(result.recommender)
    if fresh is not None:
        fresh.prefetch_mode = ls.usable_prefetch(fresh)
        ls.ranker.swap(fresh)
