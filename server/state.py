"""The language server's state: settings, the store and its ranker, analysed drafts, worker pools.

Threading model (why): the asyncio loop only parses messages and converts types; everything that
can take more than a few milliseconds runs in a worker thread via ``run_in_executor``:

* ``fast`` (1 thread): the keystroke-path prefetch, never queued behind slow work;
* ``rank`` (1 thread): speculative full rankings (the second stage), debounced per document;
* ``index`` (1 thread): store imports, reindexing and index rebuilds (:mod:`.jobs`); the old
  recommender serves until the new one is swapped in (:meth:`SpeculativeRanker.swap`);
* ``analysis`` (1 thread): reading a draft version (:meth:`CitewiseServer.view`);
* ``bib`` (1 thread): indexing large ``.bib`` files (:class:`.biblibrary.BibLibrary`).

Handlers are coroutines, so ``$/cancelRequest`` cancels them (pygls cancels the task); work for a
document version that has been superseded is dropped (debounce tasks are cancelled, queued
rankings for vanished contexts are cancelled, and a completion computed for an old version
answers ``ContentModified``). The feature handlers live in :mod:`.handlers`, wired in :mod:`.lsp`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from citewise import __version__
from citewise.indexer.store import StoredPaper
from citewise.models.library import Library
from citewise.models.prefetch_choice import choose_prefetch
from citewise.models.query import ContextQuery
from citewise.models.recommender import Recommendation, Recommender
from citewise.settings import Settings

from . import draft
from .bib_overlay import OverlayCache, with_entries
from .biblibrary import BibLibrary
from .citation_checks import ReferenceChecker
from .confine import PathRule
from .documents import DraftView, analyze, read_disk
from .ranking import SpeculativeRanker
from .transport import GatedProtocol

log = logging.getLogger("citewise.lsp")


PARENT_POLL_S = 2.0


def _rss_mb() -> float | None:
    """Resident memory of this process (Linux /proc), None where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, but not ours to signal
        return True
    return True


@dataclass
class ReindexJob:
    token: str
    cancel: threading.Event


class CitewiseServer(LanguageServer):
    """LSP state: settings, the store and its ranker, per-document analysis caches."""

    def __init__(self, store_path: str | None = None, token: str | None = None) -> None:
        super().__init__("citewise", __version__, protocol_cls=GatedProtocol)
        self.required_token = token  # TCP on another interface: the client must present it
        self.token_ok = False
        self.cli_store = store_path
        self.settings = Settings()
        self.init_options: dict[str, Any] = {}
        self.ranker: SpeculativeRanker | None = None
        self.store_papers: int | None = None  # papers in the served store (None: not opened)
        self._checker: ReferenceChecker | None = None  # see :meth:`checker`
        self.ready = asyncio.Event()
        # Set once the first attempt to open the store has ended, opened or not: a completion that
        # comes while the store opens waits for it (briefly) instead of answering without papers.
        self.store_settled = asyncio.Event()
        self.fast_pool = ThreadPoolExecutor(1, thread_name_prefix="citewise-fast")
        self.rank_pool = ThreadPoolExecutor(1, thread_name_prefix="citewise-rank")
        self.index_pool = ThreadPoolExecutor(1, thread_name_prefix="citewise-index")
        # Draft analysis (parsing, \input files, .bib look-ups) and .bib indexing: never on the loop.
        self.analysis_pool = ThreadPoolExecutor(1, thread_name_prefix="citewise-analysis")
        self.bib_pool = ThreadPoolExecutor(1, thread_name_prefix="citewise-bib")
        self.bibs = BibLibrary(self.bib_pool, self._open_buffer, on_ready=self._bibs_ready_threadsafe)
        # The workspace's own .bib entries the store lacks, ranked beside it (bib_overlay.py).
        self.overlays = OverlayCache(self.bib_pool, on_ready=self._bibs_ready_threadsafe)
        self.view_tasks: dict[tuple, asyncio.Future] = {}
        self.loop: asyncio.AbstractEventLoop | None = None  # set at initialize, for worker threads
        self.views: dict[str, DraftView] = {}
        # (document version, bib stamp) each view was analysed for: a newer answer is never replaced
        # by an older one that finishes later.
        self.view_stamps: dict[str, tuple[int | None, int]] = {}
        self.debounce: dict[str, asyncio.Task] = {}
        self.live_keys: dict[str, set[str]] = {}
        self.reindex_job: ReindexJob | None = None
        self.fetch_job: ReindexJob | None = None  # citewise.fetchAround (handlers/fetch.py)
        self.bib_stamp = 0  # bumped when a .bib changes on disk, invalidating cached views
        self._shown: set[str] = set()
        # The per-kind source summary for the status tooltip: (library, generation, rows), and
        # the index-thread job refreshing it (see :meth:`source_summary`).
        self._sources_cache: tuple[Library, int, list[dict]] | None = None
        self._sources_job: Future | None = None
        # Re-publish diagnostics of every open draft (set by :func:`.lsp.create_server`).
        self.reanalyse: Callable[[], None] = lambda: None

    # -- helpers ------------------------------------------------------------------------------
    @property
    def root(self) -> Path | None:
        root = self.workspace.root_path
        return Path(root) if root else None

    def log_info(self, message: str) -> None:
        self.window_log_message(types.LogMessageParams(types.MessageType.Info, message))

    def show(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """window/showMessage, once per distinct message (settings are re-applied on every pull);
        from a worker thread it is handed to the event loop, which owns the connection."""
        if message in self._shown:
            return
        self._shown.add(message)
        params = types.ShowMessageParams(kind, message)
        if threading.current_thread() is threading.main_thread() or self.loop is None:
            self.window_show_message(params)
        else:
            self.loop.call_soon_threadsafe(self.window_show_message, params)

    def read_text(self, path: Path) -> str | None:
        """An open editor buffer first (unsaved edits count), else the file on disk."""
        buf = self._open_buffer(str(path))
        return buf[1] if buf is not None else read_disk(path)

    def _open_buffer(self, path: str) -> tuple[int, str] | None:
        """``(version, text)`` of ``path`` when it is open in the editor (unsaved edits count)."""
        uri = from_fs_path(path)
        docs = self.workspace.text_documents
        if uri and uri in docs:
            doc = docs[uri]
            return (doc.version or 0), doc.source
        return None

    def _bibs_ready_threadsafe(self) -> None:
        """A .bib index finished building (worker thread): re-analyse on the loop."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._bibs_changed)

    def _bibs_changed(self) -> None:
        self.bib_stamp += 1
        self.reanalyse()

    async def view(self, uri: str) -> DraftView | None:
        """The analysed draft for the current version of ``uri``: built in the analysis thread
        (never on the event loop), once per (version, bibliography state), shared by requests."""
        if uri not in self.workspace.text_documents:
            return None
        doc = self.workspace.get_text_document(uri)
        lang = draft.language_for(uri, doc.language_id)
        if lang is None:
            return None
        stamp = (doc.version, self.bib_stamp)
        cached = self.views.get(uri)
        if cached is not None and self.view_stamps.get(uri) == stamp:
            return cached
        task = self.view_tasks.get((uri, stamp))
        if task is None:
            # The text and its version are read now, together: the document object changes
            # under us with the next didChange, before the worker runs.
            path, source, version = to_fs_path(uri) or uri, doc.source, doc.version
            settings_bib, root = self.settings.bibliography, self.root

            def work() -> DraftView:
                view = analyze(
                    path,
                    source,
                    lang,
                    version=version,
                    bibliography_setting=settings_bib,
                    workspace_root=root,
                    read_text=self.read_text,
                    bibs=self.bibs.snapshot,
                )
                rec = self.ranker.recommender if self.ranker is not None else None
                self.overlays.prepare(view.bib_texts, rec, view.bib)  # before the first completion
                return view

            task = asyncio.ensure_future(self.in_pool(self.analysis_pool, work))
            key = (uri, stamp)
            self.view_tasks[key] = task
            task.add_done_callback(lambda _t: self.view_tasks.pop(key, None))
        v = await asyncio.shield(task)
        if uri not in self.views or self.view_stamps.get(uri, (-1, -1)) <= stamp:
            self.views[uri] = v
            self.view_stamps[uri] = stamp
        return v

    def watch_parent(self, pid: int | None) -> None:
        """Exit when the editor that started us is gone (``processId`` of ``initialize``), so no
        server is ever left orphaned, whatever its worker threads are doing."""
        if not pid or pid == os.getpid():
            return

        def watch() -> None:
            while True:
                time.sleep(PARENT_POLL_S)
                if not _alive(pid):
                    log.warning("the editor (pid %s) is gone: exiting", pid)
                    os._exit(0)

        threading.Thread(target=watch, name="citewise-parent-watch", daemon=True).start()

    def checker(self) -> ReferenceChecker | None:
        """The reference checker over the recommender being served (None before a store is open).

        One instance, so its caches (entry checks by entry text, fit scores by context) make
        re-checking after an edit cheap; rebuilt when the ranker's recommender is swapped (a
        reindex, another store or engine), so no finding ever comes from an old store."""
        ranker = self.ranker
        if ranker is None:
            return None
        rec = ranker.recommender
        checker = self._checker
        if checker is None or checker.rec is not rec:
            checker = self._checker = ReferenceChecker(rec)
        return checker

    def version_of(self, uri: str) -> int | None:
        if uri not in self.workspace.text_documents:
            return None
        return self.workspace.get_text_document(uri).version

    async def in_pool(self, pool: ThreadPoolExecutor, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    # -- settings and store -------------------------------------------------------------------
    def apply_settings(self, data: Any, base: Settings | None = None) -> bool:
        """Validate and apply settings; True when another store must be loaded."""
        settings, problems = Settings.from_dict(data, base)
        for problem in problems:
            self.show(problem)
        old = self.settings
        self.settings = settings
        if old.bibliography != settings.bibliography:
            self.bib_stamp += 1  # drafts that declare no .bib now read another one
        if self.ranker is not None:
            self.ranker.configure(k=settings.k, candidates=settings.candidates, rerank=settings.rerank)
            if old.prefetch != settings.prefetch:
                self.ranker.recommender.prefetch_mode = self.usable_prefetch(self.ranker.recommender)
                self.ranker.swap(self.ranker.recommender)  # cached lists came from the old mode
        if self.ranker is not None and old.engine != settings.engine:
            return True  # the same store served from another engine: reopen it
        return self.ranker is not None and old.store_path() != settings.store_path() and bool(settings.store)

    async def pull_configuration(self) -> bool:
        """Settings from workspace/configuration (section ``citewise``) over initializationOptions;
        True when another store must be loaded."""
        ws = self.client_capabilities.workspace
        if not (ws and ws.configuration):
            return False
        try:
            result = await asyncio.wait_for(
                self.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section="citewise")])
                ),
                5,
            )
        except Exception as exc:
            log.info("workspace/configuration failed: %s", exc)
            return False
        value = result[0] if result else None
        if isinstance(value, dict) and value:
            return self.apply_settings({**self.init_options, **value})
        if value is not None and not isinstance(value, dict):
            return self.apply_settings(value)
        return False

    def usable_prefetch(self, rec: Recommender) -> str:
        """The configured prefetch mode, or ``auto`` (with a message saying why) when it needs a
        dense index that this store does not have: every full ranking would fail otherwise."""
        choice = choose_prefetch(self.settings.prefetch, rec, str(self.store_path()))
        if choice.notice:
            self.show(f"citewise: {choice.notice}")
        return choice.mode

    def store_path(self) -> Path:
        if self.settings.store:
            return self.settings.store_path()
        if self.cli_store:
            return Path(self.cli_store).expanduser()
        return self.settings.store_path()

    def explicit_store(self) -> bool:
        """Whether the store path was given (setting or --store) rather than the default one."""
        return bool(self.settings.store or self.cli_store)

    def empty_store_note(self) -> str | None:
        """What to say where suggestions would be, when the store cannot give any: it is empty, or
        it could not be opened (None: it has papers, or it is still opening)."""
        if not self.store_settled.is_set() or (self.ranker is not None and self.store_papers):
            return None
        path = self.store_path()
        state = "is empty" if self.ranker is not None else "could not be opened"
        store_arg = f" --store {path}" if self.explicit_store() else ""
        return (
            f"the paper store {path} {state}: import your library with `citewise index refs.bib{store_arg}` "
            f"(or your Zotero database: `citewise index ~/Zotero/zotero.sqlite{store_arg}`) to get "
            "suggestions; your draft's own .bib entries are offered meanwhile"
        )

    def with_bib_entries(
        self, view: DraftView, query: ContextQuery, ranked: list[Recommendation], k: int
    ) -> list[Recommendation]:
        """``ranked`` with the draft's own ``.bib`` entries that the store lacks, each where the
        store's word ranking would put it (all of them, ranked by the sentence, while there is no
        store). Worker threads only: it may index a small ``.bib`` on first use."""
        rec = self.ranker.recommender if self.ranker is not None else None
        overlay = self.overlays.get(view.bib_texts, rec, view.bib)
        return with_entries(ranked, overlay, rec, query, k)

    def write_rule(self) -> PathRule:
        """Where this server may write (:mod:`.confine`): the workspace and the folders of the open
        drafts, and the files the user named in the ``bibliography`` setting."""
        root = self.root
        folders = [Path(p).parent for uri in self.workspace.text_documents if (p := to_fs_path(uri))]
        named = [
            (root / os.path.expanduser(b)) if root is not None else Path(os.path.expanduser(b))
            for b in self.settings.bibliography
        ]
        return PathRule.of([*([root] if root is not None else []), *folders], named)

    def bib_paper(self, view: DraftView, key: str) -> StoredPaper | None:
        """A ``.bib`` entry the store lacks, as the draft's ``.bib`` describes it (title, authors,
        year...), for hover and menus; None when the store holds it or it is still being read."""
        rec = self.ranker.recommender if self.ranker is not None else None
        overlay = self.overlays.get(view.bib_texts, rec, view.bib)
        return overlay.by_key(key) if overlay is not None else None

    def open_recommender(self, path: Path) -> Recommender:
        from citewise.indexer.store import Store

        if self.explicit_store() and not path.exists() and not path.parent.is_dir():
            # A mistyped path must not silently become an empty store in new folders.
            raise FileNotFoundError(f"the folder {path.parent} does not exist")
        store = Store(path, create=True)
        if store.created:
            log.warning("created a new paper store at %s", path)
        rec = Recommender(store, prefetch_mode="auto", engine=self.settings.engine)
        rec.prefetch_mode = self.usable_prefetch(rec)
        rec.warm_up()
        return rec

    # -- speculative ranking + diagnostics (debounced per document) ---------------------------

    def language_id(self, uri: str) -> str | None:
        if uri in self.workspace.text_documents:
            return self.workspace.get_text_document(uri).language_id
        return None

    # -- completion ---------------------------------------------------------------------------

    # -- code actions -------------------------------------------------------------------------

    # -- hover / definition -------------------------------------------------------------------

    # -- commands -----------------------------------------------------------------------------

    def status(self) -> dict:
        """What the server holds and does now: papers, queued work, memory."""
        ranker = self.ranker
        return {
            "ready": self.ready.is_set(),
            "papers": ranker.library.count() if ranker is not None else 0,
            "store": str(self.store_path()),
            "openDocuments": len(self.workspace.text_documents),
            "pendingAnalyses": sum(1 for t in self.debounce.values() if not t.done()),
            "viewTasks": len(self.view_tasks),
            "queuedRankings": ranker.pending() if ranker is not None else 0,
            "cachedRankings": ranker.cached_count() if ranker is not None else 0,
            "pendingEntries": self.bibs.pending_count(),
            "reindexing": self.reindex_job is not None,
            "fetching": self.fetch_job is not None,
            "rssMB": _rss_mb(),
            "sources": self.source_summary(),
        }

    def source_summary(self) -> list[dict] | None:
        """What each kind of source gave the store (papers, abstracts, citation edges and how many
        reach a stored paper, citing sentences), for the status tooltip; None until first known.

        Why cached and computed in the index thread: it is a pass over the store's tables (half a
        second on ACM-CR, seconds on a million papers), and the status command runs in the
        keystroke thread every 15 s. So a status answers with the last summary at once and, when the
        store changed since (an import, a reindex), queues a fresh one behind the index work; the
        editor's next poll shows it."""
        ranker = self.ranker
        if ranker is None:
            return None
        library, cached = ranker.library, self._sources_cache
        generation = library.generation
        fresh = cached is not None and cached[0] is library and cached[1] == generation
        job = self._sources_job
        if not fresh and (job is None or job.done()):
            try:
                self._sources_job = self.index_pool.submit(self._summarize_sources, library, generation)
            except RuntimeError:  # the pools are shutting down with the server
                pass
        return cached[2] if cached is not None and cached[0] is library else None  # never another store's

    def _summarize_sources(self, library: Library, generation: int) -> None:
        """Index thread: the summary of ``library`` at ``generation``, in the status's camelCase."""
        try:
            rows = [
                {
                    "kind": s.kind,
                    "files": s.files,
                    "papers": s.papers,
                    "abstracts": s.abstracts,
                    "edges": s.edges,
                    "resolvedEdges": s.resolved_edges,
                    "sentences": s.sentences,
                }
                for s in library.sources()
            ]
        except Exception as exc:  # a damaged or vanished store: the status goes on without it
            log.warning("could not summarise the store's sources: %s", exc)
            return
        self._sources_cache = (library, generation, rows)


# ----------------------------------------------------------------------------------------------
# Conversions to lsprotocol types
# ----------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------
# Feature registration
# ----------------------------------------------------------------------------------------------
