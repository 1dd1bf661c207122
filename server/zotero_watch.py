"""The ``zotero`` setting: the user's Zotero database kept imported into the store while the
server runs, so an item added in Zotero is suggested (under its Better BibTeX key) seconds later,
without an export and without a restart.

Why polling: Zotero commits to ``zotero.sqlite`` or to its ``-wal`` log, outside the workspace,
where an editor's file watcher does not look; a stat of two files every few seconds costs nothing.
The stat and the import run in the index thread (:mod:`.jobs`: the one thread that writes the
store), never on the event loop, which only sleeps between polls; the rebuilt index is swapped in
as after a ``.bib`` import. The import reads the database without writing it
(``indexer/sources/zotero_db.py``) and mirrors it: edited items update, deleted ones go.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from citewise.indexer.sources.zotero import ZoteroError, import_library
from citewise.indexer.sources.zotero_db import Stamp, stamp
from citewise.indexer.store import Store, StoreError
from citewise.models.recommender import Recommender

from .jobs import refresh, schedule_index_save

if TYPE_CHECKING:
    from .state import CitewiseServer

log = logging.getLogger("citewise.lsp")

POLL_S = 3.0
# The running watch of each server (a task nothing refers to may be collected; a server that
# is initialized again, over TCP, keeps its one watch).
_WATCHES: weakref.WeakKeyDictionary[CitewiseServer, asyncio.Task] = weakref.WeakKeyDictionary()


@dataclass
class WatchState:
    """What the watch last imported: which database into which store, and the database's stamp
    then (a change of either, or of the setting, imports again)."""

    target: tuple[str, str] | None = None  # (store path, database path)
    stamp: Stamp | None = None


@dataclass
class SyncResult:
    """One import of the library: what changed, the new recommender (None: nothing changed), or
    why it failed."""

    imported: int = 0
    updated: int = 0
    removed: int = 0
    recommender: Recommender | None = None
    error: str = ""


def start(ls: CitewiseServer) -> asyncio.Task:
    """Start the watch (after the store is loaded; once per server): it follows the setting as it
    changes, and the store as it is swapped."""
    task = _WATCHES.get(ls)
    if task is None or task.done():
        task = _WATCHES[ls] = asyncio.ensure_future(_watch(ls, WatchState()))
    return task


async def _watch(ls: CitewiseServer, state: WatchState) -> None:
    while True:
        try:
            await poll_once(ls, state)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the watch outlives one bad poll
            log.warning("watching the Zotero database failed: %s", exc)
        await asyncio.sleep(POLL_S)


async def poll_once(ls: CitewiseServer, state: WatchState) -> bool:
    """Import the configured database if it (or the setting, or the store) changed since the last
    import; returns whether it imported."""
    setting = ls.settings.zotero.strip()
    if not setting or ls.ranker is None:
        state.target = None
        return False
    path = Path(setting).expanduser()
    store = ls.ranker.recommender.store
    current = await ls.in_pool(ls.index_pool, stamp, path)
    if current is None:
        ls.show(f"citewise: the zotero setting names {path}, which does not exist; nothing imported from it")
        return False
    target = (str(store.path), str(path))
    if (target, current) == (state.target, state.stamp):
        return False
    state.target, state.stamp = target, current
    prefetch, engine = ls.settings.prefetch, ls.settings.engine
    result = await ls.in_pool(ls.index_pool, sync_library, store, path, prefetch, engine)
    if ls.ranker is None or ls.ranker.recommender.store is not store:
        state.target = None  # another store was loaded meanwhile: import into that one next
        return True
    _apply(ls, path, result)
    return True


def sync_library(store: Store, path: Path, prefetch: str = "auto", engine: str = "local") -> SyncResult:
    """Import the database (index thread) and, when the store changed, build the recommender that
    serves it (embedding new papers first where the ranking uses a dense model)."""
    before = store.generation
    try:
        stats = import_library(store, path.resolve())
    except (ZoteroError, StoreError) as exc:
        return SyncResult(error=str(exc))
    result = SyncResult(stats.imported, stats.updated, stats.removed)
    if store.generation != before:
        result.recommender = refresh(store, [], rebuild=True, prefetch=prefetch, engine=engine).recommender
    return result


def _apply(ls: CitewiseServer, path: Path, result: SyncResult) -> None:
    """On the loop: say what failed, or swap the new index in and re-check the open drafts."""
    if result.error:
        ls.show(f"citewise: cannot import the Zotero library {path}: {result.error}")
        return
    if result.recommender is None or ls.ranker is None:
        return
    result.recommender.prefetch_mode = ls.usable_prefetch(result.recommender)
    ls.ranker.swap(result.recommender)
    schedule_index_save(ls)
    ls.log_info(
        f"citewise: Zotero library {path}: {result.imported} imported, {result.updated} updated, "
        f"{result.removed} removed; index swapped"
    )
    ls.bib_stamp += 1  # keys the drafts cite may have come or gone
    ls.reanalyse()
