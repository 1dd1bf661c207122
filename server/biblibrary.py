"""The draft's bibliography files as the server sees them: text, index, and entries in flight.

Why a service of its own: a reference manager's export can hold 50,000 entries (72 MB); reading
and indexing it takes seconds, so it must never happen on a keystroke. Texts are re-read only
when the file's size or mtime changes (or the open buffer's version does); indexes are built in
a worker thread while the previous index of the same file (or none) keeps serving, and
``on_ready`` asks the server to re-analyse once a new index is in.

Entries the server has sent through ``workspace/applyEdit`` may sit in an unsaved editor buffer
that the client never shows us (no ``didOpen`` for a buffer opened by an edit). They stay
*pending* here, and count as part of the file, until the file's visible text holds their key,
or the file changes on disk without them (the user undid the edit and saved).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field

from .bibfiles import BibFile, bib_keys
from .bibindex import BibIndex
from .confine import MAX_BIB_BYTES, read_bounded

log = logging.getLogger(__name__)

OpenBuffer = Callable[[str], "tuple[int, str] | None"]  # path -> (version, text) of an open buffer


@dataclass(frozen=True)
class _Stamp:
    """What identifies one text of a file: an open buffer's version, or the file's size and mtime."""

    kind: str  # "buffer", "disk", "missing"
    a: int = 0
    b: int = 0


@dataclass
class _FileState:
    stamp: _Stamp | None = None
    text: str | None = None
    index: BibIndex | None = None  # index of ``text`` (None while building)
    index_stamp: _Stamp | None = None
    last_index: BibIndex | None = None  # an older index of the same file, served meanwhile
    building: bool = False


@dataclass
class PendingEntry:
    key: str
    entry: str
    disk_stamp: _Stamp | None  # the file on disk when the entry was sent


@dataclass
class BibSnapshot:
    """What one analysis sees: texts (None: file missing), the combined index, completeness."""

    texts: dict[str, str | None] = field(default_factory=dict)
    index: BibIndex = field(default_factory=BibIndex)
    complete: bool = True  # False while some file's index is still being built


class BibLibrary:
    """Texts and key indexes of ``.bib`` files, built off the caller's thread; pending entries."""

    def __init__(
        self, pool: Executor, open_buffer: OpenBuffer, on_ready: Callable[[], None] | None = None
    ) -> None:
        self._pool = pool
        self._open_buffer = open_buffer
        self._on_ready = on_ready
        self._lock = threading.Lock()
        self._files: dict[str, _FileState] = {}
        self._pending: dict[str, dict[str, PendingEntry]] = {}
        self._combined: dict[tuple, BibIndex] = {}

    # -- texts ---------------------------------------------------------------------------------
    def _read(self, path: str, state: _FileState) -> None:
        """Refresh ``state.text`` if the file (or its buffer) changed. Called off the loop."""
        buf = self._open_buffer(path)
        if buf is not None:
            stamp = _Stamp("buffer", buf[0], len(buf[1]))
            if stamp != state.stamp:
                state.stamp, state.text = stamp, buf[1]
            return
        stamp = self.disk_stamp(path)
        if stamp.kind == "missing":
            state.stamp, state.text = stamp, None
            return
        if stamp == state.stamp:
            return
        # A regular file of bounded size only (confine.py): a FIFO would block this thread, a
        # link to /dev/zero would never end.
        state.stamp, state.text = stamp, read_bounded(path, MAX_BIB_BYTES)

    def disk_stamp(self, path: str) -> _Stamp:
        try:
            st = os.stat(path)
        except OSError:
            return _Stamp("missing")
        return _Stamp("disk", st.st_mtime_ns, st.st_size)

    # -- indexes -------------------------------------------------------------------------------
    def _build(self, path: str, state: _FileState, stamp: _Stamp | None, text: str | None) -> None:
        """Index ``text`` (the file as ``stamp`` saw it; None if it went missing meanwhile: no entries)."""
        try:
            index = BibIndex.from_texts([(path, text)]) if text is not None else BibIndex()
        except Exception:  # a scanner bug must not leave the file "building" forever
            log.exception("indexing %s failed", path)
            index = BibIndex()
        with self._lock:
            state.building = False
            if state.stamp == stamp:
                state.index, state.index_stamp = index, stamp
            state.last_index = index
        if self._on_ready is not None:
            self._on_ready()

    def snapshot(self, files: list[BibFile], wait: bool = False) -> BibSnapshot:
        """Texts and the combined index of ``files`` (plus pending entries). Never blocks on an
        index build unless ``wait`` (the command line, where nothing else is waiting)."""
        snap = BibSnapshot()
        parts: list[tuple[str, BibIndex]] = []
        for bf in files:
            path = str(bf.path)
            with self._lock:
                state = self._files.setdefault(path, _FileState())
            self._read(path, state)
            snap.texts[path] = state.text
            if state.text is None:
                self._settle(path, state, None)
                continue
            with self._lock:
                ready = state.index is not None and state.index_stamp == state.stamp
                start = not ready and not state.building
                if start:
                    state.building = True
            if start:
                if wait:
                    self._build(path, state, state.stamp, state.text)
                    ready = True
                else:
                    self._pool.submit(self._build, path, state, state.stamp, state.text)
            served = state.index if ready else state.last_index
            if not ready:
                snap.complete = False
            if served is not None:
                parts.append((path, served))
            # Only what the served index holds may stop being pending: a key the new text has but
            # whose index is still building would otherwise be offered (and appended) again.
            self._settle(path, state, served)
        snap.index = self._combine(parts, [str(bf.path) for bf in files])
        return snap

    def _combine(self, parts: list[tuple[str, BibIndex]], paths: list[str]) -> BibIndex:
        """The files' indexes and the entries pending for these files (only these: an entry sent
        to another draft's ``.bib`` is not in this draft's bibliography)."""
        with self._lock:
            pending = [(p, tuple(sorted(self._pending.get(p, {})))) for p in paths]
        key = (tuple((p, id(ix)) for p, ix in parts), tuple(pending))
        with self._lock:
            hit = self._combined.get(key)
        if hit is not None:
            return hit
        if len(parts) == 1 and not any(v for _, v in pending):
            combined = parts[0][1]
        else:
            combined = BibIndex()
            for path, ix in parts:
                combined.merge(ix, path)
            for path, keys in pending:
                entries = self._pending.get(path, {})
                text = "\n".join(entries[k].entry for k in keys if k in entries)
                if text:
                    combined.add_text(path, text)
        with self._lock:
            if len(self._combined) > 8:
                self._combined.clear()
            self._combined[key] = combined
        return combined

    # -- pending entries -----------------------------------------------------------------------
    def add_pending(self, path: str, key: str, entry: str) -> None:
        """An entry for ``path`` was sent to the client (applied, maybe not saved)."""
        with self._lock:
            self._pending.setdefault(path, {})[key] = PendingEntry(key, entry, self.disk_stamp(path))

    def pending_count(self) -> int:
        """Entries inserted into buffers but not yet seen in a saved ``.bib`` (the server's status)."""
        with self._lock:
            return sum(len(v) for v in self._pending.values())

    def pending_keys(self, path: str) -> set[str]:
        with self._lock:
            return set(self._pending.get(path, {}))

    def _settle(self, path: str, state: _FileState, served: BibIndex | None) -> None:
        """Drop pending entries that the served index now holds, or that a later save left out."""
        with self._lock:
            pending = self._pending.get(path)
            if not pending:
                return
            keys: dict[str, int] | None = None  # scanned only for a save that may have left one out
            for key, p in list(pending.items()):
                saved_without = (
                    state.stamp is not None
                    and state.stamp.kind == "disk"
                    and (
                        p.disk_stamp is not None
                        and p.disk_stamp.kind == "disk"
                        and state.stamp != p.disk_stamp
                    )
                )
                if served is not None and key in served.entries:
                    del pending[key]
                elif saved_without:
                    if keys is None:
                        keys = bib_keys(state.text) if state.text is not None else {}
                    if key not in keys:
                        del pending[key]
            if not pending:
                del self._pending[path]

    def forget(self, path: str) -> None:
        """The file changed outside us (watched-file event): re-read it on next use."""
        with self._lock:
            state = self._files.get(path)
            if state is not None:
                state.stamp = None
