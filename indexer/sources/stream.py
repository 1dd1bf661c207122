"""Reading a source file as it is published: plain, gzip (``.gz``) or Zstandard (``.zst``),
streaming, in bounded memory; JSON Lines a line at a time, JSON documents whole.

Why here: the dumps are large (an OpenAlex snapshot part or an S2AG release file holds millions of
records, tens of GB uncompressed) and ship compressed, so a reader must never hold a file. The
compression is told by the file's first bytes, not its name: S2AG release files and OpenAlex parts
are gzip whatever they are called. Zstandard is read with the ``zstandard`` module (a dependency);
an environment without it gets a message saying what to install.
"""

from __future__ import annotations

import io
import json
import os
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import msgspec
from isal import isal_zlib

from citewise.errors import CitewiseError

from ..records import ImportProblem, RecordError

T = TypeVar("T")

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_BOM = b"\xef\xbb\xbf"
MAX_LINE = 64 << 20  # a line read for detection is cut here (an API page on one line: ~1-15 MB)
MAX_DOCUMENT = 512 << 20  # a JSON document (API response) read whole: refuse past this


_DECODE = msgspec.json.Decoder().decode


def loads(raw: bytes) -> Any:
    """One JSON value, as ``json.loads`` gives it, in two thirds of the time.

    Why msgspec first: the standard decoder was the largest single cost of an import (110 us of
    an 18 KB OpenAlex work; msgspec 70 us). Why ``json.loads`` after it: where msgspec refuses
    what the standard library accepts (``NaN``, ``1e400``, lone surrogates, a UTF-16 line) the
    value is then the same as before, and a line that is not JSON gets the standard library's
    message; where msgspec accepts, its value equals ``json.loads``'s (integers of any size
    included, unlike orjson, which turns those past 64 bits into floats)."""
    try:
        return _DECODE(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return json_loads(raw)
    except RecursionError:  # msgspec's own, for a value nested past its limit
        raise ValueError(TOO_DEEP) from None


TOO_DEEP = "nested too deeply to read (over about 1,000 levels of [ or {)"


def json_loads(raw: bytes | str) -> Any:
    """``json.loads`` with a value nested too deeply as a ValueError, like any other bad JSON.

    Why: the standard decoder recurses, and its RecursionError is no ValueError, so one such line
    ended the reading of the whole file (every later record lost), and as a first line it crashed
    format detection with a traceback."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None


class StreamError(CitewiseError):
    """A file citewise cannot read (its compression module is missing, it is not what it says)."""


# What reading a damaged file raises: a truncated or corrupt gzip stream (isal's inflate errors
# are not zlib's), a file that is not what its first bytes say.
# isal's stub declares ``error: Exception`` (an instance); the module's ``error`` is the class.
_DAMAGED: tuple[type[Exception], ...] = (OSError, EOFError, zlib.error, isal_zlib.error, ValueError)  # type: ignore[assignment]
# ... and what ends a read with a problem: those, or citewise's own stream errors.
_UNREADABLE: tuple[type[Exception], ...] = (*_DAMAGED, StreamError)


@dataclass(frozen=True)
class Line:
    """One non-blank line of a JSON Lines file, undecoded, with its 1-based line number."""

    number: int
    raw: bytes


def compression(path: Path) -> str:
    """``"gzip"``, ``"zstd"`` or ``""`` from the file's first bytes. A file shorter than a magic
    number that is its beginning is an archive cut within its first bytes (nothing else is one
    byte 0x1f): read as one, it is reported cut short, not as a line of invalid JSON."""
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic.startswith(GZIP_MAGIC) or (magic and GZIP_MAGIC.startswith(magic)):
        return "gzip"
    if magic == ZSTD_MAGIC or (magic and len(magic) < 4 and ZSTD_MAGIC.startswith(magic)):
        return "zstd"
    return ""


def _zstd_frames(path: Path) -> Callable[[], Any]:
    """A factory of Zstandard decompressors, one per frame."""
    try:
        import zstandard  # type: ignore[import-not-found]
    except ImportError:
        raise StreamError(
            f"{path}: a Zstandard-compressed file, and the 'zstandard' module is not installed "
            "(pip install zstandard), or decompress it first (zstd -d)"
        ) from None
    return zstandard.ZstdDecompressor().decompressobj


class DamagedArchive(EOFError):
    """The compressed data ends early (truncated) or is followed by bytes that are not part of it.

    Raised only once every byte that decompressed has been read (see :func:`check_complete`)."""


_CHUNK = 256 << 10  # compressed bytes read from the file at a time
# Compressed bytes fed to the decompressor at a time: at damage in the middle of a file, what the
# failing call would have given is lost, so this bounds the loss (a few records) and the memory.
_FEED = 16 << 10


class _Inflating(io.RawIOBase):
    """The decompressed bytes of a gzip or Zstandard file, member (frame) after member.

    Why not ``igzip.open`` / ``stream_reader``: at bytes after the last gzip member, isal raised
    and dropped output it had already inflated (the last records of the file were lost and a
    valid line blamed), and python-zstandard's reader returned a clean end for a truncated file
    (a cut ``.zst`` read as empty, skipped in a folder). Here every byte that decompresses is
    handed on first; what is wrong is kept in :attr:`damage` and raised by :func:`check_complete`
    once the reader has seen the end, with the compressed offset where the data went wrong."""

    def __init__(self, raw: IO[bytes], new: Callable[[], Any], magic: bytes, kind: str) -> None:
        super().__init__()
        self._raw, self._new, self._magic, self._kind = raw, new, magic, kind
        self._obj = new()
        self._out = memoryview(b"")  # decompressed, not yet handed on
        self._pending = b""  # compressed bytes not yet fed
        self._offset = 0  # compressed bytes consumed before ``_pending``
        self.damage: DamagedArchive | None = None
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:  # type: ignore[override]
        while not self._out and not self._done:
            self._step()
        n = min(len(buffer), len(self._out))
        buffer[:n] = self._out[:n]
        self._out = self._out[n:]  # a view: no copy of the rest
        return n

    def _step(self) -> None:
        """Feed one chunk; at a member's end, start the next one or judge what follows."""
        if not self._pending:
            self._pending = self._raw.read(_CHUNK)
            if not self._pending:
                self._finish_input()
                return
        if self._obj.eof:
            self._next_member()
            return
        fed, after = self._pending[:_FEED], self._pending[_FEED:]
        try:
            self._out = memoryview(self._obj.decompress(fed))
        except Exception as exc:  # isal's, zlib's and zstandard's errors share no base class
            self._fail(f"the {self._kind} data is damaged near byte {self._offset:,} ({exc})")
            return
        rest = self._obj.unused_data if self._obj.eof else b""
        self._offset += len(fed) - len(rest)
        self._pending = rest + after

    def _next_member(self) -> None:
        while len(self._pending) < len(self._magic) and (more := self._raw.read(_CHUNK)):
            self._pending += more
        if self._pending.startswith(self._magic):
            self._obj = self._new()
        elif self._pending.strip(b"\0"):
            self._fail(f"bytes that are not {self._kind} data after its end, at byte {self._offset:,}")
        else:  # zero padding (a tape or tar block): ignored, as gzip -d does
            self._pending = b""

    def _finish_input(self) -> None:
        if not self._obj.eof:
            self._fail(f"the {self._kind} data is cut short (truncated at byte {self._offset:,})")
        self._done = True

    def _fail(self, message: str) -> None:
        self.damage = DamagedArchive(message)
        self._done = True

    def close(self) -> None:
        self._raw.close()
        super().close()


def check_complete(stream: IO[bytes]) -> None:
    """Raise :class:`DamagedArchive` when ``stream`` (from :func:`open_binary`, read to its end)
    stopped at damage: a truncated archive, foreign bytes after it."""
    damage = getattr(getattr(stream, "raw", None), "damage", None)
    if damage is not None:
        raise damage


def open_binary(path: Path) -> IO[bytes]:
    """The file's decompressed bytes as a buffered stream (the caller closes it, and calls
    :func:`check_complete` after reading to the end)."""
    kind = compression(path)
    if kind:
        # ISA-L's inflate (isal): 21 us for an 18 KB OpenAlex work against the gzip module's 62.
        new = _zstd_frames(path) if kind == "zstd" else (lambda: isal_zlib.decompressobj(31))
        magic = ZSTD_MAGIC if kind == "zstd" else GZIP_MAGIC
        raw = open(path, "rb")  # noqa: SIM115 - closed with the reader wrapping it
        inflated = io.BufferedReader(_Inflating(raw, new, magic, kind), buffer_size=1 << 20)
        _RAW[os.fspath(path)] = raw
        return inflated
    stream = open(path, "rb")  # noqa: SIM115 - the caller closes it
    _RAW[os.fspath(path)] = stream
    return stream


# The file on disk under each open stream, for :func:`bytes_read` (weak: a closed and dropped
# stream leaves no entry).
_RAW: weakref.WeakValueDictionary[str, IO[bytes]] = weakref.WeakValueDictionary()


def bytes_read(path: str | os.PathLike[str]) -> int | None:
    """How far the open reader of ``path`` is into the file as it lies on disk (compressed bytes
    for ``.gz`` / ``.zst``), or ``None`` when none is open. Why: a progress bar against the file's
    size then has the right ETA for a compressed dump, whose decompressed size is unknown."""
    raw = _RAW.get(os.fspath(path))
    if raw is None:
        return None
    try:
        return raw.tell()
    except (ValueError, OSError):  # closed
        return None


def _first_lines(path: Path, n: int = 2) -> list[bytes]:
    """The first ``n`` non-blank lines (each cut at ``MAX_LINE``), BOM dropped."""
    out: list[bytes] = []
    with open_binary(path) as fh:
        while len(out) < n:
            raw = fh.readline(MAX_LINE)
            if not raw:
                break
            if not out and raw.startswith(_BOM):
                raw = raw[3:]
            if raw.strip():
                out.append(raw)
    return out


def _decodes(raw: bytes) -> bool:
    try:
        json_loads(raw)
    except ValueError:
        return False
    return True


def is_document(path: Path) -> bool:
    """Whether the file is one JSON document over several lines (a pretty-printed API response)
    rather than JSON Lines: neither of its first two lines is a JSON value. (A JSON Lines file
    with a broken first line still has a good second one; a one-line document is both.)"""
    lines = _first_lines(path, 2)
    return bool(lines) and not any(_decodes(raw) for raw in lines)


def first_values(path: Path, n: int = 20) -> list[Any]:
    """The file's first JSON values (its first ``n`` lines that decode, or the whole document),
    for telling formats apart; ``[]`` when there is none or the file cannot be read. Raises
    :class:`StreamError` for a ``.zst`` file without the ``zstandard`` module: the user must be
    told, not have the file skipped as "unknown".

    Why several: a format decided by the first record alone read a whole arXiv, Crossref or
    S2AG file with the wrong schema when that one record lacked its id."""
    try:
        if is_document(path):
            try:
                return [load_document(path)]
            except ValueError:
                pass  # JSON Lines whose first lines are broken: their first good lines tell
        out = []
        for raw in _first_lines(path, n):  # past a few broken lines at the top
            try:
                out.append(json_loads(raw))
            except ValueError:
                continue
        return out
    except _DAMAGED:
        return []


def first_value(path: Path) -> Any:
    """The file's first JSON value (see :func:`first_values`), ``None`` when there is none."""
    values = first_values(path)
    return values[0] if values else None


def iter_lines(path: Path) -> Iterator[Line]:
    """The non-blank lines of a (compressed) JSON Lines file, streaming; a leading BOM dropped."""
    with open_binary(path) as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                check_complete(fh)  # the last line of a cut archive is part of the damage
            if number == 1 and raw.startswith(_BOM):
                raw = raw[3:]
            if raw.strip():
                yield Line(number, raw)
        check_complete(fh)


def load_document(path: Path) -> Any:
    """A whole JSON document (an API response); raises ValueError naming what is wrong."""
    with open_binary(path) as fh:
        data = fh.read(MAX_DOCUMENT + 1)
        if len(data) <= MAX_DOCUMENT:
            check_complete(fh)
    if len(data) > MAX_DOCUMENT:
        raise ValueError(f"a JSON document over {MAX_DOCUMENT >> 20} MB; split it into JSON Lines")
    if data.startswith(_BOM):
        data = data[3:]
    return json_loads(data)


def iter_json(path: Path) -> Iterator[tuple[int, Any] | ImportProblem]:
    """Every JSON value of a file with its line number: one a line for JSON Lines, or the whole
    document (line 1) for a pretty-printed one. A line that is not UTF-8 or not JSON becomes an
    :class:`ImportProblem` naming its line, and reading goes on; a file that cannot be read (a
    truncated gzip, a missing module) ends with one problem at the line reached."""
    number = 0
    try:
        if is_document(path):
            try:
                document = load_document(path)
            except ValueError:
                pass  # not one document after all: JSON Lines whose first lines are bad
            else:
                yield 1, document
                return
        for line in iter_lines(path):
            number = line.number
            try:
                yield number, loads(line.raw)
            except UnicodeDecodeError as exc:
                yield ImportProblem(str(path), number, f"not UTF-8 (byte {exc.start + 1}: {exc.reason})")
            except ValueError as exc:
                yield ImportProblem(str(path), number, f"invalid JSON: {_json_reason(exc)}")
    except _UNREADABLE as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        yield ImportProblem(str(path), number + 1 if number else 1, f"cannot read: {reason}", incomplete=True)


def _json_reason(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} (column {exc.colno})"
    return str(exc)


def iter_converted(
    path: str | Path, convert: Callable[[Any, str, int], Iterable[T]]
) -> Iterator[T | ImportProblem]:
    """What each JSON value of ``path`` holds, through ``convert(value, source, line)``: a value
    that does not parse, or that ``convert`` refuses with a :class:`RecordError`, becomes a
    problem naming its line, and reading goes on. The one loop of the row-per-line readers."""
    source = str(path)
    for item in iter_json(Path(path)):
        if isinstance(item, ImportProblem):
            yield item
            continue
        line, value = item
        try:
            yield from convert(value, source, line)
        except RecordError as exc:
            yield ImportProblem(source, line, str(exc))
