"""The citewise language server (pygls 2): thin LSP handlers over the pure core.

Threading model (why): the asyncio loop only parses and converts; every store/index access that
can take more than a few milliseconds runs in a worker thread via ``run_in_executor``:

* ``fast`` (1 thread): the keystroke-path prefetch, never queued behind slow work;
* ``rank`` (1 thread): speculative full rankings (the second stage), debounced per document;
* ``index`` (1 thread): store imports, reindexing and index rebuilds; the old recommender
  serves until the new one is swapped in (:meth:`SpeculativeRanker.swap`).

Handlers are coroutines, so ``$/cancelRequest`` cancels them (pygls cancels the task); work for a
document version that has been superseded is dropped (debounce tasks are cancelled, queued
rankings for vanished contexts are cancelled, and a completion computed for an old version
answers ``ContentModified``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from citewise import __version__
from citewise.indexer.store import StoredPaper
from citewise.models.query import Candidate, ContextQuery
from citewise.models.recommender import Recommendation, Recommender
from citewise.settings import Settings

from . import draft
from .actions import Action, EditPlan, NewEntry, cite_plan, missing_entry_action, placeholder_actions
from .biblibrary import BibLibrary
from .completion import INSERT_COMMAND, CompletionEntry, build_completion, documentation
from .documents import DraftView, analyze, cited_paper_ids, paper_for_key
from .hover import Diag, bib_only_markdown, hover_markdown, missing_key_diagnostic, placeholder_diagnostic
from .ranking import RankedList, SpeculativeRanker, filter_by_prefix, suggest_for_draft
from .transport import GatedProtocol, attach_editor_log, configure_logging

log = logging.getLogger("citewise.lsp")

SUGGEST_COMMAND = "citewise.suggestForDraft"
REINDEX_COMMAND = "citewise.reindex"
NOTE_COMMAND = "citewise.entriesApplied"  # internal: a code action's .bib edit was applied
STATUS_COMMAND = "citewise.status"  # the server's state, for a status bar (and the burst test)
COMMANDS = [SUGGEST_COMMAND, REINDEX_COMMAND, INSERT_COMMAND, NOTE_COMMAND, STATUS_COMMAND]
BIB_GLOB = "**/*.bib"
_SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".hg", ".svn", "_build", "build"}


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
class _Reindex:
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
        self.ready = asyncio.Event()
        self.fast_pool = ThreadPoolExecutor(1, thread_name_prefix="citewise-fast")
        self.rank_pool = ThreadPoolExecutor(1, thread_name_prefix="citewise-rank")
        self.index_pool = ThreadPoolExecutor(1, thread_name_prefix="citewise-index")
        # Draft analysis (parsing, \input files, .bib look-ups) and .bib indexing: never on the loop.
        self.analysis_pool = ThreadPoolExecutor(1, thread_name_prefix="citewise-analysis")
        self.bib_pool = ThreadPoolExecutor(1, thread_name_prefix="citewise-bib")
        self.bibs = BibLibrary(self.bib_pool, self._open_buffer, on_ready=self._bibs_ready_threadsafe)
        self._view_tasks: dict[tuple, asyncio.Future] = {}
        self._loop: asyncio.AbstractEventLoop | None = None  # set at initialize, for worker threads
        self._views: dict[str, DraftView] = {}
        self._debounce: dict[str, asyncio.Task] = {}
        self._live_keys: dict[str, set[str]] = {}
        self._reindex: _Reindex | None = None
        self._bib_stamp = 0  # bumped when a .bib changes on disk, invalidating cached views
        self._shown: set[str] = set()

    # -- helpers ------------------------------------------------------------------------------
    @property
    def root(self) -> Path | None:
        root = self.workspace.root_path
        return Path(root) if root else None

    def log_info(self, message: str) -> None:
        self.window_log_message(types.LogMessageParams(types.MessageType.Info, message))

    def show(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """window/showMessage, once per distinct message (settings are re-applied on every pull)."""
        if message in self._shown:
            return
        self._shown.add(message)
        self.window_show_message(types.ShowMessageParams(kind, message))

    def read_text(self, path: Path) -> str | None:
        """An open editor buffer first (unsaved edits count), else the file on disk."""
        uri = from_fs_path(str(path))
        if uri and uri in self.workspace.text_documents:
            return self.workspace.get_text_document(uri).source
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

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
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._bibs_changed)

    def _bibs_changed(self) -> None:
        self._bib_stamp += 1
        for uri in list(self.workspace.text_documents):
            self.schedule_analysis(uri, delay=0.0)

    async def view(self, uri: str) -> DraftView | None:
        """The analysed draft for the current version of ``uri``: built in the analysis thread
        (never on the event loop), once per (version, bibliography state), shared by requests."""
        if uri not in self.workspace.text_documents:
            return None
        doc = self.workspace.get_text_document(uri)
        lang = draft.language_for(uri, doc.language_id)
        if lang is None:
            return None
        stamp = (doc.version, self._bib_stamp)
        cached = self._views.get(uri)
        if cached is not None and getattr(cached, "_stamp", None) == stamp:
            return cached
        task = self._view_tasks.get((uri, stamp))
        if task is None:
            path, source = to_fs_path(uri) or uri, doc.source
            settings_bib, root = self.settings.bibliography, self.root

            def work() -> DraftView:
                v = analyze(path, source, lang, version=doc.version, bibliography_setting=settings_bib,
                            workspace_root=root, read_text=self.read_text, bibs=self.bibs.snapshot)
                v._stamp = stamp  # type: ignore[attr-defined]
                return v

            task = asyncio.ensure_future(self.in_pool(self.analysis_pool, work))
            self._view_tasks[(uri, stamp)] = task
            task.add_done_callback(lambda _t, k=(uri, stamp): self._view_tasks.pop(k, None))
        v = await asyncio.shield(task)
        current = self._views.get(uri)
        if current is None or getattr(current, "_stamp", (-1, -1)) <= stamp:
            self._views[uri] = v
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

    def version_of(self, uri: str) -> int | None:
        if uri not in self.workspace.text_documents:
            return None
        return self.workspace.get_text_document(uri).version

    async def in_pool(self, pool: ThreadPoolExecutor, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    # -- settings and store -------------------------------------------------------------------
    def apply_settings(self, data: Any, base: Settings | None = None) -> None:
        settings, problems = Settings.from_dict(data, base)
        for problem in problems:
            self.show(problem)
        old = self.settings
        self.settings = settings
        if self.ranker is not None:
            self.ranker.configure(k=settings.k, candidates=settings.candidates, rerank=settings.rerank)
            if old.prefetch != settings.prefetch:
                self.ranker.recommender.prefetch_mode = settings.prefetch
                self.ranker.swap(self.ranker.recommender)  # cached lists came from the old mode
        if self.ranker is not None and old.store_path() != settings.store_path() and settings.store:
            asyncio.ensure_future(self.load_store())

    async def pull_configuration(self) -> None:
        """Settings from workspace/configuration (section ``citewise``) over initializationOptions."""
        ws = self.client_capabilities.workspace
        if not (ws and ws.configuration):
            return
        try:
            result = await asyncio.wait_for(self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="citewise")])), 5)
        except Exception as exc:
            log.info("workspace/configuration failed: %s", exc)
            return
        value = result[0] if result else None
        if isinstance(value, dict) and value:
            self.apply_settings({**self.init_options, **value})
        elif value is not None and not isinstance(value, dict):
            self.apply_settings(value)

    def store_path(self) -> Path:
        if self.settings.store:
            return self.settings.store_path()
        if self.cli_store:
            return Path(self.cli_store).expanduser()
        return self.settings.store_path()

    def _explicit_store(self) -> bool:
        """Whether the store path was given (setting or --store) rather than the default one."""
        return bool(self.settings.store or self.cli_store)

    def _open_recommender(self, path: Path) -> Recommender:
        from citewise.indexer.store import Store

        if self._explicit_store() and not path.exists() and not path.parent.is_dir():
            # A mistyped path must not silently become an empty store in new folders.
            raise FileNotFoundError(f"the folder {path.parent} does not exist")
        store = Store(path, create=True)
        if store.created:
            log.warning("created a new paper store at %s", path)
        return Recommender(store, prefetch_mode=self.settings.prefetch)

    async def load_store(self) -> None:
        path = self.store_path()
        t0 = time.perf_counter()
        try:
            rec = await self.in_pool(self.index_pool, self._open_recommender, path)
        except Exception as exc:
            self.show(
                f"citewise: cannot open the paper store {path}: {exc}. Fix the citewise.store setting (or --store), "
                f"or create a store with `citewise index YOUR_LIBRARY.bib --store {path}`.", types.MessageType.Error)
            return
        if self.ranker is None:
            self.ranker = SpeculativeRanker(
                rec, self.rank_pool, k=self.settings.k, candidates=self.settings.candidates, rerank=self.settings.rerank
            )
        else:
            self.ranker.swap(rec)
        n = await self.in_pool(self.index_pool, rec.store.count)
        self.ready.set()
        self.log_info(f"citewise ready: {n} papers from {path} in {time.perf_counter() - t0:.2f} s")
        if self.settings.import_workspace_bibs:
            await self.import_bibs(self.workspace_bibs())
        n = await self.in_pool(self.index_pool, rec.store.count)
        if n == 0:
            self.show(f"citewise: the paper store {path} is empty, so there is nothing to suggest yet. Import your "
                      f"library with `citewise index YOUR_LIBRARY.bib --store {path}` (BibTeX, ACL Anthology XML or "
                      "JSON Lines), or add a .bib to this workspace.")
        for uri in list(self.workspace.text_documents):
            self.schedule_analysis(uri, delay=0.0)

    def workspace_bibs(self, limit: int = 200) -> list[Path]:
        root = self.root
        if root is None or not root.is_dir():
            return []
        out: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
            out.extend(Path(dirpath) / f for f in sorted(filenames) if f.lower().endswith(".bib"))
            if len(out) >= limit:
                break
        return out[:limit]

    async def import_bibs(self, paths: list[Path], dropped: list[Path] = ()) -> None:  # type: ignore[assignment]
        """Import (changed) .bib files into the store, then swap in a rebuilt index if anything changed."""
        if self.ranker is None:
            return
        store = self.ranker.store

        def work() -> tuple[int, Recommender | None]:
            from citewise.indexer.importer import import_sources

            before = store.generation
            changed = 0
            for p in dropped:
                store.drop_source(str(Path(p).resolve()))
            existing = [str(p) for p in paths if Path(p).is_file()]
            if existing:
                try:
                    stats = import_sources(store, existing, skip_current=True)
                    changed = stats.imported + stats.updated + stats.removed
                except Exception as exc:
                    log.warning("importing %s failed: %s", existing, exc)
            if store.generation != before:
                _embed_new_papers(store)
                return changed, Recommender(store, prefetch_mode=self.settings.prefetch)
            return changed, None

        changed, rec = await self.in_pool(self.index_pool, work)
        if rec is not None:
            self.ranker.swap(rec)
            self.log_info(f"citewise: imported {len(paths)} .bib file(s), {changed} papers changed; index swapped")
        self._bib_stamp += 1
        for uri in list(self.workspace.text_documents):
            self.schedule_analysis(uri, delay=0.0)

    # -- speculative ranking + diagnostics (debounced per document) ---------------------------
    def schedule_analysis(self, uri: str, delay: float | None = None) -> None:
        old = self._debounce.pop(uri, None)
        if old is not None:
            old.cancel()
        if draft.language_for(uri, self._language_id(uri)) is None:
            return
        d = self.settings.debounce_ms / 1000 if delay is None else delay
        self._debounce[uri] = asyncio.ensure_future(self._analyse(uri, d))

    def _language_id(self, uri: str) -> str | None:
        if uri in self.workspace.text_documents:
            return self.workspace.get_text_document(uri).language_id
        return None

    async def _analyse(self, uri: str, delay: float) -> None:
        try:
            await asyncio.sleep(delay)
            if self.ranker is None:
                return
            view = await self.view(uri)
            if view is None:
                return
            version = view.version
            phs = view.placeholders(self.settings.context_chars)
            queries = [view.query_for(ph.context) for ph in phs]
            futures = [self.ranker.schedule(q) for q in queries] if self.settings.rerank else []
            self._live_keys[uri] = {self.ranker.key(q) for q in queries}
            self.ranker.retain(set().union(*self._live_keys.values()))
            if futures:
                wrapped = [asyncio.wrap_future(f) for f in futures]
                await asyncio.wait(wrapped, timeout=max(self.settings.budget_ms / 1000, 0.05))
            if self.version_of(uri) != version:
                return  # superseded: the newer version's task publishes
            lists: list[list[Recommendation] | None] = []
            for f in futures or [None] * len(queries):
                if f is not None and f.done() and not f.cancelled() and f.exception() is None:
                    lists.append(f.result().items[: self.settings.k])
                else:
                    lists.append(None)
            missing = [i for i, x in enumerate(lists) if x is None]
            if missing:
                fast = await self.in_pool(
                    self.fast_pool, lambda: [self.ranker.fast(queries[i]).items for i in missing]
                )
                for i, items in zip(missing, fast, strict=True):
                    lists[i] = items
            diags = [placeholder_diagnostic(ph, view.lines, items) for ph, items in zip(phs, lists, strict=True)]
            diags += await self.in_pool(self.fast_pool, self._missing_key_diags, view)
            if self.version_of(uri) != version:
                return
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=[_diag(d) for d in diags])
            )
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("analysis of %s failed", uri)

    def _missing_key_diags(self, view: DraftView) -> list[Diag]:
        out = []
        store = self.ranker.store if self.ranker else None
        for cit in view.citations():
            for i, k in enumerate(cit.keys):
                if k.placeholder or not k.key or k.key in view.bib:
                    continue
                known = store.find(key=k.key) if store is not None else None
                out.append(missing_key_diagnostic(cit, i, view.lines, known.title if known else None))
        return out

    # -- completion ---------------------------------------------------------------------------
    async def complete(self, params: types.CompletionParams) -> types.CompletionList | None:
        uri = params.text_document.uri
        view = await self.view(uri)
        if view is None:
            return None
        offset = view.lines.offset(params.position.line, params.position.character)
        cur = draft.citation_at(view.text, offset, view.lang)
        if cur is None:
            return None
        if self.ranker is None:
            return types.CompletionList(is_incomplete=True, items=[])
        s = self.settings
        query = view.query_for(draft.local_context(view.text, offset, view.lang, s.context_chars))
        ranked: RankedList | None = self.ranker.cached(query) if s.rerank else None
        prefix = cur.prefix
        if ranked is None:
            if s.rerank:
                self.ranker.schedule(query)
            depth = s.candidates if prefix else s.k
            ranked = await self.in_pool(self.fast_pool, self.ranker.fast, query, depth)
            complete = not s.rerank
        else:
            complete = True
        if self.version_of(uri) != view.version:
            raise JsonRpcContentModified("the document changed; ask again")
        items, truncated = ranked.items[: s.k], False
        if prefix:  # store look-ups for the user's own keys: off the loop

            def select() -> list[Recommendation]:
                got = filter_by_prefix(ranked.items, prefix, lambda p: self._key_of(p, view))
                return got + self._bib_key_matches(view, prefix, {r.paper.id for r in got})

            items = await self.in_pool(self.fast_pool, select)
            items, truncated = items[: s.k], len(items) > s.k
        caps = self.client_capabilities.text_document
        ci = caps.completion.completion_item if caps and caps.completion else None
        lazy_docs = bool(ci and ci.resolve_support and "documentation" in (ci.resolve_support.properties or []))
        result = build_completion(
            items, cur, view.lines, view.bib, key_style=s.entry_style, doc_uri=uri, bib_path=view.target_bib,
            complete=complete, with_documentation=not lazy_docs,
        )
        return types.CompletionList(
            is_incomplete=result.is_incomplete or truncated, items=[_completion_item(e) for e in result.items]
        )

    def _key_of(self, paper, view: DraftView) -> str:
        from .bibindex import key_for_paper

        return key_for_paper(paper, view.bib, self.settings.entry_style).key

    def _bib_key_matches(self, view: DraftView, prefix: str, seen: set[int]) -> list[Recommendation]:
        """Papers of the draft's .bib whose key starts with what was typed (the user's own keys)."""
        out = []
        if self.ranker is None:
            return out
        for key, ids in view.bib.entries.items():
            if not key.lower().startswith(prefix.lower()) or len(out) >= 10:
                continue
            p = paper_for_key(self.ranker.store, key, ids)
            if p is None:  # not imported (yet): offer the entry as the .bib has it
                p = StoredPaper(title=ids.title or key, key=key, id=0)
            elif p.id in seen:
                continue
            seen.add(p.id)
            out.append(Recommendation(p, Candidate(p.id, 0.0, {"your .bib": 1.0}, {"your .bib": 1})))
        return out

    async def resolve(self, item: types.CompletionItem) -> types.CompletionItem:
        data = item.data if isinstance(item.data, dict) else {}
        pid = data.get("paperId")
        if self.ranker is None or pid is None or item.documentation is not None:
            return item
        paper = await self.in_pool(self.fast_pool, self.ranker.store.get, int(pid))
        if paper is not None:
            md = documentation(paper, data.get("why", ""), bool(data.get("inBib")), data.get("key", item.label))
            item.documentation = types.MarkupContent(types.MarkupKind.Markdown, md)
        return item

    # -- code actions -------------------------------------------------------------------------
    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        uri = params.text_document.uri
        view = await self.view(uri)
        if view is None or self.ranker is None:
            return None
        start = view.lines.offset(params.range.start.line, params.range.start.character)
        end = view.lines.offset(params.range.end.line, params.range.end.character)
        out: list[Action] = []
        bib_text = view.target_bib_text()
        for ph in view.placeholders(self.settings.context_chars):
            cit = ph.citation
            if cit.end < start or cit.start > end:
                continue
            items = await self._full_list(view.query_for(ph.context))
            out += placeholder_actions(
                ph, items, str(view.path), view.lines, view.bib, view.target_bib, bib_text, self.settings.entry_style
            )
        store = self.ranker.store
        for cit in view.citations():
            if cit.end < start or cit.start > end:
                continue
            for k in cit.keys:
                if k.placeholder or not k.key or k.key in view.bib:
                    continue
                paper = await self.in_pool(self.fast_pool, lambda key=k.key: store.find(key=key))
                if paper is not None and (a := missing_entry_action(k.key, paper, view.bib, view.target_bib, bib_text)):
                    out.append(a)
        return [self._code_action(a, params.context.diagnostics, uri) for a in out]

    async def _full_list(self, query: ContextQuery) -> list[Recommendation]:
        """The full ranking for a query: cached, else awaited within the budget, else the fast list."""
        assert self.ranker is not None
        hit = self.ranker.cached(query)
        if hit is None and self.settings.rerank:
            fut = asyncio.wrap_future(self.ranker.schedule(query))
            done, _ = await asyncio.wait([fut], timeout=max(self.settings.budget_ms / 1000, 0.05))
            if done and not fut.cancelled() and fut.exception() is None:
                hit = fut.result()
        if hit is None:
            hit = await self.in_pool(self.fast_pool, self.ranker.fast, query)
        return hit.items[: self.settings.k]

    def _code_action(self, a: Action, diagnostics: list[types.Diagnostic], uri: str) -> types.CodeAction:
        fixes = [d for d in diagnostics if a.diagnostic_key and isinstance(d.data, dict) and d.data.get("key") == a.diagnostic_key]
        edit = self.workspace_edit(a.plan)
        if edit is not None:
            # The client runs the command after applying the edit: that is how we learn that the
            # entries are in its (maybe unsaved) .bib buffer, so they are not appended twice.
            note = types.Command(title=a.title, command=NOTE_COMMAND, arguments=[{"entries": _entries_json(a.plan.entries)}])
            return types.CodeAction(title=a.title, kind=a.kind, edit=edit, command=note if a.plan.entries else None,
                                    is_preferred=a.preferred, diagnostics=fixes or None)
        # The client cannot create the missing .bib: the server creates it, then applies the edit.
        cmd = types.Command(title=a.title, command=INSERT_COMMAND, arguments=[{"plan": _plan_json(a.plan)}])
        return types.CodeAction(title=a.title, kind=a.kind, command=cmd, is_preferred=a.preferred, diagnostics=fixes or None)

    def workspace_edit(self, plan: EditPlan, create_on_disk: bool = False) -> types.WorkspaceEdit | None:
        """The plan as a WorkspaceEdit the client understands (None: it needs a file created first)."""
        ws = self.client_capabilities.workspace
        we = ws.workspace_edit if ws else None
        doc_changes = bool(we and we.document_changes)
        can_create = doc_changes and bool(we.resource_operations and types.ResourceOperationKind.Create in we.resource_operations)
        if any(c.create for c in plan.changes) and not can_create:
            if not create_on_disk:
                return None
            for c in plan.changes:
                if c.create:
                    Path(c.path).parent.mkdir(parents=True, exist_ok=True)
                    Path(c.path).touch(exist_ok=True)
        if doc_changes:
            changes: list[Any] = []
            for c in plan.changes:
                uri = from_fs_path(c.path)
                if c.create and can_create:
                    changes.append(types.CreateFile(uri=uri, options=types.CreateFileOptions(ignore_if_exists=True)))
                changes.append(types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=self.version_of(uri)),
                    edits=[_text_edit(e) for e in c.edits],
                ))
            return types.WorkspaceEdit(document_changes=changes)
        out: dict[str, list[types.TextEdit]] = {}
        for c in plan.changes:
            out.setdefault(from_fs_path(c.path), []).extend(_text_edit(e) for e in c.edits)
        return types.WorkspaceEdit(changes=out)

    # -- hover / definition -------------------------------------------------------------------
    async def _key_at(self, uri: str, pos: types.Position) -> tuple[DraftView, str] | None:
        view = await self.view(uri)
        if view is None:
            return None
        cur = draft.citation_at(view.text, view.lines.offset(pos.line, pos.character), view.lang)
        if cur is None or cur.key is None or cur.key.placeholder or not cur.key.key:
            return None
        return view, cur.key.key

    async def hover(self, params: types.HoverParams) -> types.Hover | None:
        found = await self._key_at(params.text_document.uri, params.position)
        if found is None or self.ranker is None:
            return None
        view, key = found
        ids = view.bib.entries.get(key)
        paper = await self.in_pool(self.fast_pool, paper_for_key, self.ranker.store, key, ids)
        if paper is not None:
            md = hover_markdown(paper, key, ids is not None)
        elif ids is not None:
            md = bib_only_markdown(key, view.bib.files[key], ids.line)
        else:
            md = f"`{key}` is neither in the bibliography nor in the citewise store"
        return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, md))

    async def definition(self, params: types.DefinitionParams) -> types.Location | None:
        found = await self._key_at(params.text_document.uri, params.position)
        if found is None:
            return None
        view, key = found
        ids = view.bib.entries.get(key)
        if ids is None:
            return None
        pos = types.Position(ids.line, 0)
        return types.Location(from_fs_path(view.bib.files[key]), types.Range(pos, pos))

    # -- commands -----------------------------------------------------------------------------
    async def suggest_for_draft(self, args: dict) -> list[dict]:
        uri = args.get("uri") or args.get("textDocument", {}).get("uri")
        view = await self.view(uri) if uri else None
        if view is None or self.ranker is None:
            return []
        k = int(args.get("k") or self.settings.k)
        rec = self.ranker.recommender

        def work() -> list[dict]:
            excluded = cited_paper_ids(rec.store, view)
            body = _body_text(view)
            out = []
            for s in suggest_for_draft(rec, view.title, view.abstract, body, k=k, candidates=self.settings.candidates,
                                       exclude=excluded, rerank=self.settings.rerank):
                pk = self._key_of(s.paper, view)
                out.append({"paperId": s.paper.id, "key": pk, "title": s.paper.title, "year": s.paper.year,
                            "authors": s.paper.authors, "venue": s.paper.venue, "doi": s.paper.doi or None,
                            "score": round(s.score, 6), "reasons": s.reasons, "inBib": pk in view.bib})
            return out

        return await self.in_pool(self.rank_pool, work)

    async def insert_citation(self, args: dict) -> dict:
        """Add a paper's entry to the .bib (and, with ``range``, put its key in the draft) via applyEdit."""
        if "plan" in args:
            plan = _plan_from_json(args["plan"])
        else:
            if self.ranker is None:
                return {"applied": False, "reason": "store not loaded"}
            uri = args["uri"]
            view = await self.view(uri)
            paper = await self.in_pool(self.fast_pool, self.ranker.store.get, int(args["paperId"]))
            if view is None or paper is None:
                return {"applied": False, "reason": "unknown document or paper"}
            slot = None
            if "range" in args:
                r = args["range"]
                slot = (view.lines.offset(r["start"]["line"], r["start"]["character"]),
                        view.lines.offset(r["end"]["line"], r["end"]["character"]), "", "")
            bib_path = args.get("bib") or view.target_bib
            if bib_path in view.bib_texts:
                bib_text = view.bib_texts[bib_path]
            else:
                bib_text = await self.in_pool(self.analysis_pool, self.read_text, Path(bib_path))
            _key, plan = cite_plan(paper, str(view.path), view.lines, slot, view.bib, bib_path, bib_text, self.settings.entry_style)
            if not plan.changes:
                return {"applied": True, "key": _key, "alreadyInBib": True}
        edit = self.workspace_edit(plan, create_on_disk=True)
        result = await self.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label="citewise: cite"))
        applied = bool(result and result.applied)
        if applied:
            self.note_entries(plan.entries)
        return {"applied": applied}

    def note_entries(self, entries: list[NewEntry]) -> None:
        """Entries the client now holds in its .bib (saved or not): count them as there."""
        for e in entries:
            self.bibs.add_pending(e.bib_path, e.key, e.entry)
        self._bib_stamp += 1
        for uri in list(self.workspace.text_documents):
            self.schedule_analysis(uri, delay=0.0)

    async def reindex(self, args: dict) -> dict:
        if self.ranker is None:
            return {"done": False, "reason": "store not loaded"}
        if self._reindex is not None:
            return {"done": False, "reason": "a reindex is already running"}
        force = bool(args.get("force"))
        token = str(uuid.uuid4())
        cancel = threading.Event()
        self._reindex = _Reindex(token, cancel)
        window = self.client_capabilities.window
        progress = bool(window and window.work_done_progress)
        loop = asyncio.get_running_loop()

        def report(message: str, pct: int) -> None:
            if progress:
                loop.call_soon_threadsafe(
                    self.work_done_progress.report, token,
                    types.WorkDoneProgressReport(message=message, percentage=pct, cancellable=True),
                )

        store = self.ranker.store
        bibs = [str(p) for p in self.workspace_bibs()]

        def work() -> dict:
            from citewise.indexer.importer import import_sources

            sources = sorted({s["path"] for s in store.sources() if Path(s["path"]).exists()} | set(bibs))
            t0 = time.perf_counter()
            totals = {"imported": 0, "updated": 0, "removed": 0, "files": 0}
            for i, src in enumerate(sources):
                if cancel.is_set():
                    return {**totals, "cancelled": True}
                stats = import_sources(store, [src], skip_current=not force)
                for name in ("imported", "updated", "removed"):
                    totals[name] += getattr(stats, name)
                totals["files"] += 1
                report(f"importing {Path(src).name} ({i + 1}/{len(sources)})", int(80 * (i + 1) / max(1, len(sources))))
            if cancel.is_set():
                return {**totals, "cancelled": True}
            _embed_new_papers(store, lambda done, total: report(
                f"embedding papers ({done}/{total})", 80 + int(10 * done / max(1, total))), cancel)
            if cancel.is_set():
                return {**totals, "cancelled": True}
            report("building the search index", 92)
            new = Recommender(store, prefetch_mode=self.settings.prefetch)
            if cancel.is_set():
                return {**totals, "cancelled": True}
            self.ranker.swap(new)  # atomic: the old index served until now
            return {**totals, "cancelled": False, "papers": store.count(), "seconds": round(time.perf_counter() - t0, 2)}

        try:
            if progress:
                await self.work_done_progress.create_async(token)
                self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                    title="citewise: reindexing", cancellable=True, percentage=0))
            result = await self.in_pool(self.index_pool, work)
            if progress:
                msg = "cancelled" if result.get("cancelled") else f"{result.get('papers', 0)} papers indexed"
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=msg))
            self._bib_stamp += 1
            return {"done": not result.get("cancelled"), **result}
        except asyncio.CancelledError:
            cancel.set()
            if progress:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message="cancelled"))
            raise
        finally:
            self._reindex = None

    def status(self) -> dict:
        """What the server holds and does now: papers, queued work, memory."""
        ranker = self.ranker
        return {
            "ready": self.ready.is_set(),
            "papers": ranker.store.count() if ranker is not None else 0,
            "store": str(self.store_path()),
            "openDocuments": len(self.workspace.text_documents),
            "pendingAnalyses": sum(1 for t in self._debounce.values() if not t.done()),
            "viewTasks": len(self._view_tasks),
            "queuedRankings": len(ranker._pending) if ranker is not None else 0,
            "cachedRankings": len(ranker._cache) if ranker is not None else 0,
            "pendingEntries": sum(len(v) for v in self.bibs._pending.values()),
            "reindexing": self._reindex is not None,
            "rssMB": _rss_mb(),
        }

    def cancel_progress(self, token: Any) -> None:
        if self._reindex is not None and str(token) == self._reindex.token:
            self._reindex.cancel.set()


def _embed_new_papers(store, progress=None, cancel: threading.Event | None = None) -> None:
    """Embed papers the HAtten index lacks (when a model is installed); BM25-only stores skip this.

    The serving recommender keeps its loaded index in memory meanwhile; the caller swaps in a new
    recommender that loads the updated one.
    """
    try:
        from citewise.indexer.ann import build_index
    except ImportError:
        return

    def on_progress(done: int, total: int) -> None:
        if cancel is not None and cancel.is_set():
            raise _Cancelled
        if progress is not None:
            progress(done, total)

    try:
        build_index(store, on_progress)
    except _Cancelled:
        return
    except Exception as exc:  # a broken model must not stop BM25 from serving the new papers
        log.warning("embedding new papers failed: %s", exc)


class _Cancelled(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# Conversions to lsprotocol types
# ----------------------------------------------------------------------------------------------


def _range(start: tuple[int, int], end: tuple[int, int]) -> types.Range:
    return types.Range(types.Position(*start), types.Position(*end))


def _text_edit(e) -> types.TextEdit:
    return types.TextEdit(_range(e.start, e.end), e.new_text)


def _diag(d: Diag) -> types.Diagnostic:
    return types.Diagnostic(
        range=_range(d.start, d.end), message=d.message, severity=types.DiagnosticSeverity(d.severity),
        source="citewise", code=d.code, data=d.data,
    )


def _completion_item(e: CompletionEntry) -> types.CompletionItem:
    return types.CompletionItem(
        label=e.label,
        label_details=types.CompletionItemLabelDetails(description=e.label_description),
        kind=types.CompletionItemKind.Reference,
        detail=e.detail,
        documentation=types.MarkupContent(types.MarkupKind.Markdown, e.documentation) if e.documentation else None,
        sort_text=e.sort_text,
        filter_text=e.filter_text,
        preselect=e.preselect or None,
        text_edit=types.TextEdit(_range(e.edit.start, e.edit.end), e.edit.new_text),
        command=types.Command(title=e.command[0], command=e.command[1], arguments=e.command[2]) if e.command else None,
        data=e.data,
    )


def _plan_json(plan: EditPlan) -> dict:
    return {
        "changes": [
            {"path": c.path, "create": c.create,
             "edits": [{"start": list(e.start), "end": list(e.end), "text": e.new_text} for e in c.edits]}
            for c in plan.changes
        ],
        "entries": _entries_json(plan.entries),
    }


def _entries_json(entries: list[NewEntry]) -> list[dict]:
    return [{"bib": e.bib_path, "key": e.key, "entry": e.entry} for e in entries]


def _entries_from_json(data: Any) -> list[NewEntry]:
    if not isinstance(data, list):
        return []
    return [NewEntry(str(e["bib"]), str(e["key"]), str(e["entry"])) for e in data
            if isinstance(e, dict) and {"bib", "key", "entry"} <= e.keys()]


def _plan_from_json(data: dict | list) -> EditPlan:
    from .actions import FileChange
    from .completion import Edit

    changes = data.get("changes", []) if isinstance(data, dict) else data
    entries = _entries_from_json(data.get("entries")) if isinstance(data, dict) else []
    return EditPlan([
        FileChange(c["path"], [Edit(tuple(e["start"]), tuple(e["end"]), e["text"]) for e in c["edits"]], bool(c.get("create")))
        for c in changes
    ], entries)


def _body_text(view: DraftView) -> str:
    """The draft's prose for the whole-draft query (citations and commands stripped)."""
    from . import latex, markdown

    mod = latex if view.lang == "latex" else markdown
    try:
        return draft.normalize_space(mod.to_plain(draft.cut_text(
            view.text, 0, len(view.text),
            sorted([(c.start, c.end) for c in view.citations()] + list(zip(mod.excluded_regions(view.text).starts,
                                                                          mod.excluded_regions(view.text).ends, strict=True))),
        )))
    except Exception:
        return view.text


def _args(a: list) -> dict:
    """Command arguments: one object (``{"uri": ...}``) or a bare URI."""
    if a and isinstance(a[0], dict):
        return a[0]
    if a and isinstance(a[0], str):
        return {"uri": a[0]}
    return {}


# ----------------------------------------------------------------------------------------------
# Feature registration
# ----------------------------------------------------------------------------------------------


def create_server(store_path: str | None = None, token: str | None = None) -> CitewiseServer:
    server = CitewiseServer(store_path, token)

    @server.feature(types.INITIALIZE)
    def on_initialize(ls: CitewiseServer, params: types.InitializeParams) -> None:
        ls._loop = asyncio.get_running_loop()
        attach_editor_log(ls)
        ls.watch_parent(params.process_id)
        opts = params.initialization_options
        ls.init_options = opts if isinstance(opts, dict) else {}
        ls.apply_settings(ls.init_options)

    @server.feature(types.INITIALIZED)
    async def on_initialized(ls: CitewiseServer, params: types.InitializedParams) -> None:
        await ls.pull_configuration()
        ws = ls.client_capabilities.workspace
        if ws and ws.did_change_watched_files and ws.did_change_watched_files.dynamic_registration:
            try:
                await ls.client_register_capability_async(types.RegistrationParams(registrations=[
                    types.Registration(
                        id="citewise-bib-watcher", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                        register_options=types.DidChangeWatchedFilesRegistrationOptions(
                            watchers=[types.FileSystemWatcher(glob_pattern=BIB_GLOB)]),
                    )]))
            except Exception as exc:
                log.info("file watcher not registered: %s", exc)
        await ls.load_store()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_config(ls: CitewiseServer, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and settings.get("citewise") is not None:
            ls.apply_settings({**ls.init_options, **settings["citewise"]} if isinstance(settings["citewise"], dict) else settings["citewise"])
        else:
            await ls.pull_configuration()
        for uri in list(ls.workspace.text_documents):
            ls.schedule_analysis(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: CitewiseServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule_analysis(params.text_document.uri)
        view = await ls.view(params.text_document.uri)
        if view is not None and ls.settings.import_workspace_bibs and ls.ranker is not None:
            bibs = [bf.path for bf in view.bib_files if bf.exists]
            root = ls.root
            outside = [p for p in bibs if root is None or root not in Path(p).resolve().parents]
            if outside:  # the workspace scan found the others already
                await ls.import_bibs(outside)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CitewiseServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri.lower().endswith(".bib"):
            ls._bib_stamp += 1
            for other in list(ls.workspace.text_documents):
                ls.schedule_analysis(other)
            return
        ls.schedule_analysis(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CitewiseServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        task = ls._debounce.pop(uri, None)
        if task is not None:
            task.cancel()
        ls._views.pop(uri, None)
        ls._live_keys.pop(uri, None)
        if ls.ranker is not None:
            ls.ranker.retain(set().union(*ls._live_keys.values()) if ls._live_keys else set())
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def watched(ls: CitewiseServer, params: types.DidChangeWatchedFilesParams) -> None:
        changed, deleted = [], []
        for ev in params.changes:
            path = to_fs_path(ev.uri)
            if not path or not path.lower().endswith(".bib"):
                continue
            (deleted if ev.type == types.FileChangeType.Deleted else changed).append(Path(path))
        ls._bib_stamp += 1
        if (changed or deleted) and ls.settings.import_workspace_bibs:
            await ls.import_bibs(changed, deleted)

    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=["{", ",", "@", ";", " "], resolve_provider=True),
    )
    async def completion(ls: CitewiseServer, params: types.CompletionParams):
        return await ls.complete(params)

    @server.feature(types.COMPLETION_ITEM_RESOLVE)
    async def resolve(ls: CitewiseServer, item: types.CompletionItem) -> types.CompletionItem:
        return await ls.resolve(item)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )
    async def code_action(ls: CitewiseServer, params: types.CodeActionParams):
        return await ls.code_actions(params)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: CitewiseServer, params: types.HoverParams):
        return await ls.hover(params)

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    async def definition(ls: CitewiseServer, params: types.DefinitionParams):
        return await ls.definition(params)

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(ls: CitewiseServer, params: types.WorkDoneProgressCancelParams) -> None:
        ls.cancel_progress(params.token)

    # Commands: pygls advertises them in executeCommandProvider and dispatches by name.
    @server.command(SUGGEST_COMMAND)
    async def suggest_cmd(ls: CitewiseServer, *args):
        return await ls.suggest_for_draft(_args(list(args)))

    @server.command(REINDEX_COMMAND)
    async def reindex_cmd(ls: CitewiseServer, *args):
        return await ls.reindex(_args(list(args)))

    @server.command(STATUS_COMMAND)
    async def status_cmd(ls: CitewiseServer, *args):
        return await ls.in_pool(ls.fast_pool, ls.status)

    @server.command(NOTE_COMMAND)
    def note_cmd(ls: CitewiseServer, *args):
        ls.note_entries(_entries_from_json(_args(list(args)).get("entries")))
        return {"noted": True}

    @server.command(INSERT_COMMAND)
    async def insert_cmd(ls: CitewiseServer, *args):
        return await ls.insert_citation(_args(list(args)))

    return server




def serve(store_path: str | None = None, tcp: tuple[str, int] | None = None, token: str | None = None) -> None:
    """Run the server on stdio (default) or TCP, then leave at once: worker threads still busy
    with a ranking or an import must not keep a server alive that its editor has left (the
    store is transactional and index files are replaced atomically)."""
    configure_logging()
    # Imports and index builds hold the GIL in long pure-Python stretches; a shorter switch
    # interval (5 ms by default) lets the loop and the analysis thread in between.
    sys.setswitchinterval(0.001)
    server = create_server(store_path, token)
    if tcp:
        print(f"citewise: listening on {tcp[0]}:{tcp[1]}", file=sys.stderr, flush=True)
        server.start_tcp(*tcp)
    else:
        server.start_io()
    logging.shutdown()
    os._exit(0)
