"""Parsing a large source file in a second process while this one writes the store.

Why: a dump's import is two jobs of similar weight, decoding JSON and building records (an
OpenAlex work is 16 KB of JSON: 0.3 ms) and writing SQLite (0.1-0.2 ms), and the writer must be
one process (one transaction per file). On two cores they overlap. Memory stays bounded: the
parser sends records in chunks through a queue of a few chunks, and waits when it is full.

Safety: the parser ignores Ctrl-C (the terminal sends it to both processes; only the writer must
decide, and it rolls the file back); a parser that fails or dies ends the stream with a problem
at the line it reached, never with a silently short file; a parser whose writer was killed
(``kill -9``: no chance to stop it) finds its queue full, sees within a second that its parent
changed, and exits instead of waiting forever. The parser is bound to its writer: on Linux the
kernel kills it when the writer dies (``prctl(PR_SET_PDEATHSIG)``), and on every platform a watcher
thread ends it once the writer's pipe closes or its parent pid changes, wherever it is blocked
(a full pipe, the queue's feeder thread joined at exit): a parser left behind would keep the
store's files open, and the caller's pipes, so that ``citewise index ... | tee log`` never ended.
It does not keep the terminal's or the caller's stdin/stdout/stderr either (it reports only
through its queue). Small files, one core, or a platform without ``fork`` parse in this process,
as before.

Progress: each chunk carries how far the parser is into the file on disk
(:func:`~citewise.indexer.sources.stream.bytes_read`), which the writer hands to ``on_position``;
a file read in this process reports the same every ``POSITION_EVERY`` items (:func:`metered`).
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from ..records import ImportProblem
from .stream import bytes_read

CHUNK = 500  # records a message
QUEUE_CHUNKS = 8  # messages in flight: at most ~4,000 records held between the processes
MIN_BYTES = 4 << 20  # smaller files parse in this process (a second process costs ~10 ms)
POSITION_EVERY = 500  # items between two progress reports of a file read in this process
_DONE, _FAILED = "done", "failed"
WATCH_EVERY = 0.5  # seconds between two looks of the parser's watcher at its writer
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


@dataclass
class Chunk:
    """One message of parsed items, with the parser's position in the file on disk after them."""

    items: list[Any]
    position: int | None


class _WriterGone(Exception):
    """The writer process died (its parser was re-parented): nobody will read what is sent."""


def _send(out: Any, message: Any, parent: int) -> None:
    """``out.put(message)``, giving up when the writer is gone (a full queue would block forever)."""
    while True:
        try:
            out.put(message, timeout=1.0)
            return
        except queue.Full:
            if os.getppid() != parent:
                raise _WriterGone from None


def _die_with_parent() -> None:
    """Linux: the kernel sends this process SIGKILL when the thread that forked it ends. Elsewhere,
    or where ``prctl`` cannot be called, the watcher alone does it (within ``WATCH_EVERY``)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return


def _watch_parent(parent: int) -> None:
    """The watcher thread: ends this process as soon as the writer is gone: its end of the pipe
    that multiprocessing keeps to every child closed, or this process re-parented. Checked
    here, not at the places the parser blocks, because it can block where no check runs (the
    queue's feeder thread writing into a pipe nobody reads, joined when the process exits)."""
    proc = mp.parent_process()
    sentinel = [proc.sentinel] if proc is not None and proc.sentinel is not None else []
    while os.getppid() == parent:
        if sentinel:
            if wait(sentinel, timeout=WATCH_EVERY):
                break
        else:
            threading.Event().wait(WATCH_EVERY)
    os._exit(0)


def _detach_from_caller() -> None:
    """stdin, stdout and stderr on ``/dev/null``: the parser says everything through its queue,
    and a copy of the caller's pipe held by it would keep a reader (``| tee log``) waiting."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > 2:
        os.close(null)


def _bind_to_writer(parent: int) -> None:
    """Everything that keeps the parser from outliving its writer (see the module's docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    _detach_from_caller()
    threading.Thread(target=_watch_parent, args=(parent,), name="citewise-writer-watch", daemon=True).start()


def _produce(read: Callable[[Path, str], Iterator[Any]], path: Path, fmt: str, out: Any, parent: int) -> None:
    """The parser process: chunks of ``read(path, fmt)``, then ``(_DONE,)`` or ``(_FAILED, why)``."""
    _bind_to_writer(parent)
    batch: list[Any] = []
    end: tuple[str, ...] = (_DONE,)
    try:
        for item in read(path, fmt):
            batch.append(item)
            if len(batch) >= CHUNK:
                _send(out, Chunk(batch, bytes_read(path)), parent)
                batch = []
    except _WriterGone:
        os._exit(0)
    except BaseException as exc:  # reported to the writer, which decides
        end = (_FAILED, f"{type(exc).__name__}: {exc}")
    try:
        if batch:
            _send(out, Chunk(batch, bytes_read(path)), parent)
        _send(out, end, parent)
    except _WriterGone:
        os._exit(0)


def metered(path: Path, items: Iterable[Any], on_position: Callable[[int], None] | None) -> Iterator[Any]:
    """``items`` unchanged, reporting every ``POSITION_EVERY`` of them how far into ``path`` (on
    disk) its reader is: the progress of a file read in this process."""
    if on_position is None:
        yield from items
        return
    for i, item in enumerate(items, start=1):
        yield item
        if i % POSITION_EVERY == 0 and (position := bytes_read(path)) is not None:
            on_position(position)


def _parallel_ok(path: Path) -> bool:
    try:
        big = path.stat().st_size >= MIN_BYTES
    except OSError:
        return False
    return big and (os.cpu_count() or 1) > 1 and "fork" in mp.get_all_start_methods()


def records_ahead(
    read: Callable[[Path, str], Iterator[Any]],
    path: Path,
    fmt: str,
    on_position: Callable[[int], None] | None = None,
) -> Iterator[Any]:
    """``read(path, fmt)``'s items, parsed ahead in another process when the file is large;
    ``on_position`` is told how far into the file (on disk) the reading is."""
    if not _parallel_ok(path):
        yield from metered(path, read(path, fmt), on_position)
        return
    ctx = mp.get_context("fork")
    channel = ctx.Queue(QUEUE_CHUNKS)
    proc = ctx.Process(target=_produce, args=(read, path, fmt, channel, os.getpid()), daemon=True)
    proc.start()
    line = 0
    try:
        for message in _messages(channel, proc):
            if isinstance(message, Chunk):
                yield from message.items
                line = _last_line(message.items, line)
                if on_position is not None and message.position is not None:
                    on_position(message.position)
            elif message[0] == _FAILED:
                yield ImportProblem(
                    str(path), line, f"could not read past this point ({message[1]})", incomplete=True
                )
                return
            else:
                return
        yield ImportProblem(
            str(path),
            line,
            f"could not read past this point (the parser process ended, exit code {proc.exitcode})",
            incomplete=True,
        )
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join(timeout=5)
        channel.close()


def _messages(channel: Any, proc: Any) -> Iterator[Any]:
    """Messages until the parser's last one; stops early only when the parser died without one."""
    dead = False
    while True:
        try:
            message = channel.get(timeout=0.5)
        except queue.Empty:
            if dead:
                return
            dead = not proc.is_alive()  # one more look: what it sent before dying is still queued
            continue
        yield message
        if not isinstance(message, Chunk):
            return


def _last_line(items: list[Any], default: int) -> int:
    last = items[-1]
    return int(getattr(last, "source_line", 0) or getattr(last, "line", 0) or default)
