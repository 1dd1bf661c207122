"""The LSP adapter: which message goes to which feature handler, and how the server is run.

Every handler here is a line or two: it hands the typed params to a feature module in
:mod:`.handlers` (completion, code actions, diagnostics, hover/definition, commands) or a job in
:mod:`.jobs`, which work on the server state (:mod:`.state`) and the pure core. The state, the
threading model and the caches are described in :mod:`.state`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from . import jobs, zotero_watch
from .command_ids import (
    FETCH_COMMAND,
    INSERT_COMMAND,
    NOTE_COMMAND,
    REINDEX_COMMAND,
    STATUS_COMMAND,
    SUGGEST_COMMAND,
)
from .convert import args_dict, entries_from_json
from .handlers import code_actions, commands, completion, diagnostics, fetch, navigation
from .state import CitewiseServer
from .transport import attach_editor_log, configure_logging, start_io, start_tcp

log = logging.getLogger("citewise.lsp")

BIB_GLOB = "**/*.bib"


# -- lifecycle and configuration --------------------------------------------------------------
def on_initialize(ls: CitewiseServer, params: types.InitializeParams) -> None:
    ls.loop = asyncio.get_running_loop()
    attach_editor_log(ls)
    ls.watch_parent(params.process_id)
    opts = params.initialization_options
    ls.init_options = opts if isinstance(opts, dict) else {}
    ls.apply_settings(ls.init_options)


async def on_initialized(ls: CitewiseServer, params: types.InitializedParams) -> None:
    await ls.pull_configuration()
    await _watch_bib_files(ls)
    await jobs.load_store(ls)
    zotero_watch.start(ls)  # the `zotero` setting: the library kept imported, polled in the index thread


async def _watch_bib_files(ls: CitewiseServer) -> None:
    ws = ls.client_capabilities.workspace
    if not (ws and ws.did_change_watched_files and ws.did_change_watched_files.dynamic_registration):
        return
    watcher = types.DidChangeWatchedFilesRegistrationOptions(
        watchers=[types.FileSystemWatcher(glob_pattern=BIB_GLOB)]
    )
    try:
        await ls.client_register_capability_async(
            types.RegistrationParams(
                registrations=[
                    types.Registration(
                        id="citewise-bib-watcher",
                        method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                        register_options=watcher,
                    )
                ]
            )
        )
    except Exception as exc:
        log.info("file watcher not registered: %s", exc)


async def on_config(ls: CitewiseServer, params: types.DidChangeConfigurationParams) -> None:
    section = params.settings.get("citewise") if isinstance(params.settings, dict) else None
    if section is not None:
        reload = ls.apply_settings({**ls.init_options, **section} if isinstance(section, dict) else section)
    else:
        reload = await ls.pull_configuration()
    if reload:
        asyncio.ensure_future(jobs.load_store(ls))
    diagnostics.reanalyse_all(ls, delay=None)


# -- documents ---------------------------------------------------------------------------------
async def did_open(ls: CitewiseServer, params: types.DidOpenTextDocumentParams) -> None:
    diagnostics.schedule_analysis(ls, params.text_document.uri)
    view = await ls.view(params.text_document.uri)
    if view is not None and ls.settings.import_workspace_bibs and ls.ranker is not None:
        root = ls.root
        outside = [
            bf.path
            for bf in view.bib_files
            if bf.exists and (root is None or root not in Path(bf.path).resolve().parents)
        ]
        if outside:  # the workspace scan found the others already
            await jobs.import_bibs(ls, outside)


def did_change(ls: CitewiseServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    if uri.lower().endswith(".bib"):
        ls.bib_stamp += 1
        diagnostics.reanalyse_all(ls, delay=None)
        return
    diagnostics.schedule_analysis(ls, uri)


def did_close(ls: CitewiseServer, params: types.DidCloseTextDocumentParams) -> None:
    diagnostics.forget(ls, params.text_document.uri)


async def watched(ls: CitewiseServer, params: types.DidChangeWatchedFilesParams) -> None:
    changed: list[Path] = []
    deleted: list[Path] = []
    for ev in params.changes:
        path = to_fs_path(ev.uri)
        if path and path.lower().endswith(".bib"):
            ls.bibs.forget(path)
            (deleted if ev.type == types.FileChangeType.Deleted else changed).append(Path(path))
    ls.bib_stamp += 1
    if (changed or deleted) and ls.settings.import_workspace_bibs:
        await jobs.import_bibs(ls, changed, deleted)
    else:
        diagnostics.reanalyse_all(ls)


def progress_cancel(ls: CitewiseServer, params: types.WorkDoneProgressCancelParams) -> None:
    jobs.cancel_progress(ls, params.token)


# -- commands ----------------------------------------------------------------------------------
async def suggest_cmd(ls: CitewiseServer, *args: Any):
    return await commands.suggest_for_draft(ls, args_dict(list(args)))


async def reindex_cmd(ls: CitewiseServer, *args: Any):
    return await jobs.reindex(ls, args_dict(list(args)))


async def fetch_cmd(ls: CitewiseServer, *args: Any):
    return await fetch.fetch_around(ls, args_dict(list(args)))


async def status_cmd(ls: CitewiseServer, *args: Any):
    return await ls.in_pool(ls.fast_pool, ls.status)


def note_cmd(ls: CitewiseServer, *args: Any):
    commands.note_entries(ls, entries_from_json(args_dict(list(args)).get("entries")))
    return {"noted": True}


async def insert_cmd(ls: CitewiseServer, *args: Any):
    return await commands.insert_citation(ls, args_dict(list(args)))


# -- registration ------------------------------------------------------------------------------
_COMPLETION_OPTIONS = types.CompletionOptions(
    trigger_characters=["{", ",", "@", ";", " "],
    resolve_provider=True,
    # Announced so clients keep the title beside the key through completionItem/resolve.
    completion_item=types.ServerCompletionItemOptions(label_details_support=True),
)
_CODE_ACTION_OPTIONS = types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix])

FEATURES: list[tuple[str, Any, Callable]] = [
    (types.INITIALIZE, None, on_initialize),
    (types.INITIALIZED, None, on_initialized),
    (types.WORKSPACE_DID_CHANGE_CONFIGURATION, None, on_config),
    (types.TEXT_DOCUMENT_DID_OPEN, None, did_open),
    (types.TEXT_DOCUMENT_DID_CHANGE, None, did_change),
    (types.TEXT_DOCUMENT_DID_CLOSE, None, did_close),
    (types.WORKSPACE_DID_CHANGE_WATCHED_FILES, None, watched),
    (types.TEXT_DOCUMENT_COMPLETION, _COMPLETION_OPTIONS, completion.complete),
    (types.COMPLETION_ITEM_RESOLVE, None, completion.resolve),
    (types.TEXT_DOCUMENT_CODE_ACTION, _CODE_ACTION_OPTIONS, code_actions.code_actions),
    (types.TEXT_DOCUMENT_HOVER, None, navigation.hover),
    (types.TEXT_DOCUMENT_DEFINITION, None, navigation.definition),
    (types.WINDOW_WORK_DONE_PROGRESS_CANCEL, None, progress_cancel),
]
COMMAND_HANDLERS: list[tuple[str, Callable]] = [
    (SUGGEST_COMMAND, suggest_cmd),
    (REINDEX_COMMAND, reindex_cmd),
    (FETCH_COMMAND, fetch_cmd),
    (STATUS_COMMAND, status_cmd),
    (NOTE_COMMAND, note_cmd),
    (INSERT_COMMAND, insert_cmd),
]


def create_server(store_path: str | None = None, token: str | None = None) -> CitewiseServer:
    """A server with every feature registered (pygls advertises the commands by name)."""
    server = CitewiseServer(store_path, token)
    server.reanalyse = lambda: diagnostics.reanalyse_all(server)
    for name, options, handler in FEATURES:
        server.feature(name, options)(handler) if options is not None else server.feature(name)(handler)
    for name, handler in COMMAND_HANDLERS:
        server.command(name)(handler)
    return server


def serve(
    store_path: str | None = None, tcp: tuple[str, int] | None = None, token: str | None = None
) -> None:
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
        start_tcp(server, *tcp)  # transport's reader resynchronises after a bad frame
    else:
        start_io(server)
    logging.shutdown()
    os._exit(0)
