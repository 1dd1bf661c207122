"""Background jobs on the store: open it, import .bib files, reindex -- one code path.

Importing changed ``.bib`` files and a full reindex are the same job (:func:`refresh`): import
the sources, embed new papers when the ranking uses a dense model, build a new recommender. It runs
in the index thread; the old recommender serves until the new one is swapped in
(:meth:`SpeculativeRanker.swap`), so completion never waits for it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from citewise.indexer.store import Store
from citewise.models.citation_prior import knows_citations
from citewise.models.citing_vectors import build_for
from citewise.models.recommender import Recommender

from .confine import inside, real, regular_size
from .ranking import SpeculativeRanker
from .state import ReindexJob

if TYPE_CHECKING:
    from .state import CitewiseServer

log = logging.getLogger("citewise.lsp")

_SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".hg", ".svn", "_build", "build"}
Report = Callable[[str, int], None]


class Cancelled(Exception):
    """The user cancelled the job (progress cancel or request cancellation)."""


@dataclass
class RefreshResult:
    imported: int = 0
    updated: int = 0
    removed: int = 0
    files: int = 0
    cancelled: bool = False
    recommender: Recommender | None = field(default=None, repr=False)  # None: nothing changed

    def counts(self) -> dict[str, Any]:
        return {
            "imported": self.imported,
            "updated": self.updated,
            "removed": self.removed,
            "files": self.files,
            "cancelled": self.cancelled,
        }


def refresh(
    store: Store,
    sources: Iterable[str],
    *,
    dropped: Iterable[str] = (),
    force: bool = False,
    rebuild: bool = False,
    prefetch: str = "auto",
    report: Report | None = None,
    cancel: threading.Event | None = None,
    engine: str = "local",
) -> RefreshResult:
    """Import ``sources`` (unchanged ones skipped unless ``force``), forget ``dropped``, embed new
    papers and build a new recommender when anything changed (always with ``rebuild``)."""
    from citewise.indexer.importer import import_sources

    result = RefreshResult()
    before = store.generation
    for path in dropped:
        store.drop_source(str(Path(path).resolve()))
    todo = [s for s in sources if Path(s).is_file()]
    for i, src in enumerate(todo):
        if cancel is not None and cancel.is_set():
            result.cancelled = True
            return result
        try:
            stats = import_sources(store, [src], skip_current=not force)
        except Exception as exc:  # one broken file must not stop the others
            log.warning("importing %s failed: %s", src, exc)
            continue
        result.imported, result.updated, result.removed = (
            result.imported + stats.imported,
            result.updated + stats.updated,
            result.removed + stats.removed,
        )
        result.files += 1
        if report is not None:
            report(f"importing {Path(src).name} ({i + 1}/{len(todo)})", int(80 * (i + 1) / max(1, len(todo))))
    if store.generation == before and not rebuild:
        return result
    embed_new_papers(store, report, cancel, prefetch)
    if cancel is not None and cancel.is_set():
        result.cancelled = True
        return result
    if report is not None:
        report("building the search index", 92)
    if engine.startswith("milvus-lite:"):  # a Milvus Lite file is the user's own: keep it current
        from citewise.models.engines import sync_owned

        sync_owned(store, engine)
    result.recommender = Recommender(store, prefetch_mode=prefetch, engine=engine)
    # After the recommender's BM25 index: it says whether the store now knows how papers are cited.
    if engine == "local" and embed_citing_texts(
        store, report, cancel, knows_citations(result.recommender.bm25)
    ):
        result.recommender.reload_citing()
    return result


def embed_new_papers(
    store: Store,
    report: Report | None = None,
    cancel: threading.Event | None = None,
    prefetch: str = "auto",
) -> None:
    """Embed papers the dense index lacks, only when the ranking under ``prefetch`` would use them
    (the rule of ``citewise index``: ``dense_index.ranking_uses_embeddings``); others skip this.

    The serving recommender keeps its loaded index in memory meanwhile; the caller swaps in a new
    recommender that loads the updated one.
    """
    try:
        from citewise.models.dense_index import build_index, ranking_uses_embeddings
    except ImportError:
        return
    if not ranking_uses_embeddings(store, prefetch):
        return
    _embedding_job(lambda progress: build_index(store, progress), "papers", (80, 10), report, cancel)


def embed_citing_texts(
    store: Store, report: Report | None = None, cancel: threading.Event | None = None, knows: bool = False
) -> bool:
    """Embed the citing texts the store's citing vectors lack, where it knows how its papers are
    cited (``knows``: its loaded BM25 index says so; ``citing_vectors.build_for``, the rule of
    ``citewise index``); others skip this. True when the vectors were rebuilt."""
    built = _embedding_job(
        lambda progress: build_for(store, progress, knows), "citing texts", (90, 2), report, cancel
    )
    return built is not None


def _embedding_job(
    build: Callable[[Callable[[int, int], None]], Any],
    what: str,
    percent: tuple[int, int],
    report: Report | None,
    cancel: threading.Event | None,
) -> Any:
    """One embedding step of the reindex (``build(progress)``), reported as ``embedding WHAT
    (done/total)`` from ``percent[0]`` over ``percent[1]`` points, stopped when ``cancel`` is set;
    its result, or None when cancelled or failed: a broken model must not stop BM25 from serving
    the new papers."""
    start, span = percent

    def on_progress(done: int, total: int) -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled
        if report is not None:
            report(f"embedding {what} ({done}/{total})", start + int(span * done / max(1, total)))

    try:
        return build(on_progress)
    except Cancelled:
        return None
    except Exception as exc:
        log.warning("embedding %s failed: %s", what, exc)
        return None


# -- the store ---------------------------------------------------------------------------------
async def load_store(ls: CitewiseServer) -> None:
    """Open the configured store (or swap it in), import the workspace .bib files, say what is wrong."""
    path = ls.store_path()
    t0 = time.perf_counter()
    try:
        rec = await ls.in_pool(ls.index_pool, ls.open_recommender, path)
    except Exception as exc:
        ls.store_settled.set()
        ls.show(
            f"citewise: cannot open the paper store {path}: {exc}. Fix the citewise.store setting (or --store), "
            f"or create a store with `citewise index YOUR_LIBRARY.bib --store {path}`.",
            types.MessageType.Error,
        )
        return
    if ls.ranker is None:
        s = ls.settings
        ls.ranker = SpeculativeRanker(rec, ls.rank_pool, k=s.k, candidates=s.candidates, rerank=s.rerank)
    else:
        ls.ranker.swap(rec)
    n = await ls.in_pool(ls.index_pool, rec.library.count)
    ls.store_papers = n
    ls.ready.set()
    ls.store_settled.set()
    ls.log_info(f"citewise ready: {n} papers from {path} in {time.perf_counter() - t0:.2f} s")
    if ls.settings.import_workspace_bibs:
        await import_bibs(ls, await ls.in_pool(ls.index_pool, workspace_bibs, ls.root))
    ls.store_papers = await ls.in_pool(ls.index_pool, rec.library.count)
    if ls.store_papers == 0:
        store_arg = f" --store {path}" if ls.explicit_store() else ""
        ls.show(
            f"citewise: the paper store {path} is empty, so only your draft's own .bib entries can be "
            f"suggested. Import your library with `citewise index YOUR_LIBRARY.bib{store_arg}` (or your "
            f"Zotero database: `citewise index ~/Zotero/zotero.sqlite{store_arg}`); a store for your "
            "whole field: docs/sources.md."
        )
    ls.reanalyse()


def workspace_bibs(root: Path | None, limit: int = 200) -> list[Path]:
    """The workspace's ``.bib`` files (hidden and build folders skipped), at most ``limit``."""
    if root is None or not root.is_dir():
        return []
    out: list[Path] = []
    roots = (real(root),)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for f in sorted(filenames):
            path = Path(dirpath) / f
            # Only a regular file that really lies in the workspace (confine.py): not a link out.
            if f.lower().endswith(".bib") and inside(path, roots) and regular_size(path) is not None:
                out.append(path)
        if len(out) >= limit:
            break
    return out[:limit]


async def import_bibs(ls: CitewiseServer, paths: list[Path], dropped: list[Path] | None = None) -> None:
    """Import (changed) .bib files into the store; swap in a rebuilt index if anything changed."""
    if ls.ranker is None:
        return
    store, prefetch, engine = ls.ranker.recommender.store, ls.settings.prefetch, ls.settings.engine
    result = await ls.in_pool(
        ls.index_pool,
        lambda: refresh(
            store,
            [str(p) for p in paths],
            dropped=[str(p) for p in dropped or []],
            prefetch=prefetch,
            engine=engine,
        ),
    )
    if result.recommender is not None:
        result.recommender.prefetch_mode = ls.usable_prefetch(result.recommender)
        ls.ranker.swap(result.recommender)
        ls.store_papers = await ls.in_pool(ls.index_pool, result.recommender.library.count)
        changed = result.imported + result.updated + result.removed
        ls.log_info(f"citewise: imported {len(paths)} .bib file(s), {changed} papers changed; index swapped")
        schedule_index_save(ls)
    ls.bib_stamp += 1
    ls.reanalyse()


# -- the saved search index -----------------------------------------------------------------------
def saved_index_recommender(rec: Recommender) -> Recommender | None:
    """A recommender over ``rec``'s store whose BM25 index is rebuilt and saved beside the store
    (atomically, as ``citewise index`` saves it), when ``rec`` serves the saved index plus a delta
    of what changed since; None when there is nothing to save (index thread only).

    Why: the delta serves at once after an import, but lives in memory only; without a save the
    saved index stays stale, ``citewise info`` says so, and every ``citewise`` command builds the
    same delta again on each call."""
    from citewise.indexer import bm25_files
    from citewise.indexer.bm25 import BM25Index

    if not isinstance(rec.bm25, BM25Index) or not rec.bm25.layered:
        return None
    store = rec.store
    bm25_files.load_or_build(store, allow_delta=False)
    fresh = Recommender(store, prefetch_mode=rec.prefetch_mode, engine="local")
    return fresh


def schedule_index_save(ls: CitewiseServer) -> None:
    """Save the served index in the index thread once it is a delta, then serve the saved one (if
    no other index was swapped in meanwhile)."""
    if ls.ranker is None:
        return
    served = ls.ranker.recommender
    loop = asyncio.get_running_loop()

    def work() -> None:
        try:
            fresh = saved_index_recommender(served)
        except Exception as exc:  # a read-only folder, a full disk: the delta keeps serving
            log.warning("could not save the rebuilt search index: %s", exc)
            return
        if fresh is not None:
            loop.call_soon_threadsafe(_swap_if_current, ls, served, fresh)

    ls.index_pool.submit(work)


def _swap_if_current(ls: CitewiseServer, served: Recommender, fresh: Recommender) -> None:
    if ls.ranker is not None and ls.ranker.recommender is served:
        fresh.prefetch_mode = ls.usable_prefetch(fresh)
        ls.ranker.swap(fresh)
        ls.log_info("citewise: the rebuilt search index is saved beside the store")


# -- reindex (a command, with progress) --------------------------------------------------------
async def reindex(ls: CitewiseServer, args: dict) -> dict:
    """Re-import every source of the store and the workspace .bib files, with cancellable progress."""
    if ls.ranker is None:
        return {"done": False, "reason": "store not loaded"}
    if ls.reindex_job is not None:
        return {"done": False, "reason": "a reindex is already running"}
    job = ReindexJob(str(uuid.uuid4()), threading.Event())
    ls.reindex_job = job
    window = ls.client_capabilities.window
    progress = bool(window and window.work_done_progress)
    try:
        if progress:
            await ls.work_done_progress.create_async(job.token)
            ls.work_done_progress.begin(
                job.token,
                types.WorkDoneProgressBegin(title="citewise: reindexing", cancellable=True, percentage=0),
            )
        result = await ls.in_pool(
            ls.index_pool,
            _reindex_work,
            ls,
            job,
            progress_reporter(ls, job.token, progress, job.cancel),
            bool(args.get("force")),
        )
        if progress:
            msg = "cancelled" if result.get("cancelled") else f"{result.get('papers', 0)} papers indexed"
            ls.work_done_progress.end(job.token, types.WorkDoneProgressEnd(message=msg))
        ls.bib_stamp += 1
        return {"done": not result.get("cancelled"), **result}
    except asyncio.CancelledError:
        job.cancel.set()
        if progress:
            ls.work_done_progress.end(job.token, types.WorkDoneProgressEnd(message="cancelled"))
        raise
    finally:
        ls.reindex_job = None


def progress_reporter(
    ls: CitewiseServer, token: str, progress: bool, stop: threading.Event | None = None
) -> Report:
    """Progress reports of a job's worker thread, sent on the loop; none once ``stop`` is set (the
    job was cancelled and its progress ended: a report after the end would reopen it in the
    client, which then waits for an end that never comes)."""
    loop = asyncio.get_running_loop()

    def send(params: types.WorkDoneProgressReport) -> None:
        if stop is None or not stop.is_set():
            ls.work_done_progress.report(token, params)

    def report(message: str, pct: int) -> None:
        if progress and (stop is None or not stop.is_set()):
            params = types.WorkDoneProgressReport(message=message, percentage=pct, cancellable=True)
            loop.call_soon_threadsafe(send, params)

    return report


def _reindex_work(ls: CitewiseServer, job: ReindexJob, report: Report, force: bool) -> dict:
    """Runs in the index thread."""
    assert ls.ranker is not None
    store = ls.ranker.recommender.store
    t0 = time.perf_counter()
    known = {s["path"] for s in store.sources() if Path(s["path"]).exists()}
    workspace = {str(p) for p in workspace_bibs(ls.root)} if ls.settings.import_workspace_bibs else set()
    sources = sorted(known | workspace)
    result = refresh(
        store,
        sources,
        force=force,
        rebuild=True,
        prefetch=ls.settings.prefetch,
        report=report,
        cancel=job.cancel,
        engine=ls.settings.engine,
    )
    if result.cancelled:
        return result.counts()
    if result.recommender is not None:
        result.recommender.prefetch_mode = ls.usable_prefetch(result.recommender)
        ls.ranker.swap(result.recommender)  # atomic: the old index served until now
        report("saving the search index", 97)
        fresh = saved_index_recommender(result.recommender)
        if fresh is not None:
            fresh.prefetch_mode = ls.usable_prefetch(fresh)
            ls.ranker.swap(fresh)
    ls.store_papers = store.count()
    return {**result.counts(), "papers": ls.store_papers, "seconds": round(time.perf_counter() - t0, 2)}


def cancel_progress(ls: CitewiseServer, token: Any) -> None:
    """window/workDoneProgress/cancel: stop the job (a reindex or a fetch) that reports under ``token``."""
    for job in (ls.reindex_job, ls.fetch_job):
        if job is not None and str(token) == job.token:
            job.cancel.set()
