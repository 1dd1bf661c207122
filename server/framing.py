"""LSP base-protocol framing that one bad frame cannot derail (defect D9 of issue 43).

pygls 2.1's reader only recognises ``Content-Length: N\\r\\n`` at the start of a line, and LSP
bodies do not end with a newline: after one frame with a missing, non-numeric or negative
length, a length off by a few bytes, or LF-only header lines, every later frame was glued to the
previous body and the server never answered again (alive, so the editor did not restart it).

:class:`FrameReader` instead reads headers line by line (CRLF or LF, names in any case), refuses
a missing, non-numeric, negative or oversized ``Content-Length``, reads the body by exact length,
and on any framing error logs one line and scans forward (keeping only a few bytes) to the next
``Content-Length:``, so the next well-formed frame is answered. A body that is not JSON is
usually a wrong length: it is scanned too (:meth:`FrameReader.reject`), since the next frame's
header may sit inside it. The same reader serves stdio and TCP.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Protocol

log = logging.getLogger("citewise.lsp")

MAX_BODY = 64 * 1024 * 1024  # a 32 MB draft sent as JSON fits; a body above this is refused
MAX_HEADER_BLOCK = 8 * 1024  # real clients send one or two short header lines
CHUNK = 64 * 1024
STALL_S = 1.0  # a body the client stopped sending for this long is checked for a glued frame

_HEADER_START = re.compile(rb"content-length", re.IGNORECASE)
_KEEP = len(b"content-length") - 1  # bytes kept while scanning: a header split across reads
_HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+)[ \t]*:[ \t]*(.*?)[ \t]*")
_GLUED_FRAME = re.compile(rb"content-length[ \t]*:[ \t]*\d+[ \t]*\r?\n", re.IGNORECASE)


class FramingError(Exception):
    """The bytes at the reader's position are not an LSP frame; the reader resynchronises."""


class ByteSource(Protocol):
    """Where frames come from: ``read()`` gives the next bytes available, ``b""`` at the end."""

    def read(self) -> Awaitable[bytes]: ...


class FdSource:
    """Chunks of a file descriptor (stdin), read in a thread of their own so that a blocking read
    never holds the event loop or a worker of the handlers' pools."""

    def __init__(self, fd: int, executor: Executor) -> None:
        self.fd, self.executor = fd, executor

    def read(self) -> Awaitable[bytes]:
        return asyncio.get_running_loop().run_in_executor(self.executor, _read_fd, self.fd)


def _read_fd(fd: int) -> bytes:
    """One chunk; a closed or invalid descriptor reads as the end (the editor is gone)."""
    try:
        return os.read(fd, CHUNK)
    except OSError:
        return b""


class StreamSource:
    """Chunks of an asyncio stream (a TCP connection)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def read(self) -> Awaitable[bytes]:
        return self.reader.read(CHUNK)


class FrameReader:
    """LSP frames from a byte source, resynchronising after a bad one (see the module's doc)."""

    def __init__(self, source: ByteSource) -> None:
        self._source = source
        self._buf = bytearray()
        self._eof = False
        self._pending: asyncio.Future[bytes] | None = None
        self._scan_from: int | None = None  # set: look for the next header before reading

    async def next_body(self) -> bytes | None:
        """The next frame's body, or None when the input has ended."""
        while True:
            if self._scan_from is not None:
                skip, self._scan_from = self._scan_from, None
                if not await self._resync(skip):
                    return None
            try:
                length = await self._read_headers()
                return None if length is None else await self._read_body(length)
            except FramingError as exc:
                log.warning("LSP framing error (%s): skipping to the next Content-Length header", exc)
                self._scan_from = 1  # the buffer starts at the bad frame: look past its first byte

    def reject(self, body: bytes) -> None:
        """A body that did not parse was most likely framed by a wrong ``Content-Length``: put it
        back whole, so the scan for the next header looks inside it too, from its first byte (a
        length too long by a few bytes took the first bytes of the next frame's header). The bad
        frame's header stays consumed, so every rejection makes progress."""
        self._buf[0:0] = body
        self._scan_from = 0

    async def _fill(self, timeout: float | None = None) -> bool:
        """Append the next chunk; False at the end of input or when ``timeout`` passed first.
        A read that timed out is kept and awaited next time: its bytes are never lost."""
        if self._eof:
            return False
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._source.read())
        done, _ = await asyncio.wait({self._pending}, timeout=timeout)
        if not done:
            return False
        chunk, self._pending = self._pending.result(), None
        if not chunk:
            self._eof = True
            return False
        self._buf += chunk
        return True

    async def _read_headers(self) -> int | None:
        """Consume one header block and return its ``Content-Length`` (None at the end of input).
        Nothing is consumed when it fails, so the resync starts at the bad frame."""
        headers: dict[bytes, bytes] = {}
        pos = 0
        while True:
            end = self._buf.find(b"\n", pos)
            if end < 0:
                if len(self._buf) > MAX_HEADER_BLOCK:
                    raise FramingError(f"no end of headers in {MAX_HEADER_BLOCK} bytes")
                if not await self._fill():
                    return None
                continue
            line, pos = bytes(self._buf[pos:end]).removesuffix(b"\r"), end + 1
            if not line:
                if headers:
                    length = _content_length(headers)  # raises before consuming: resync starts here
                    del self._buf[:pos]
                    return length
                del self._buf[:pos]  # a stray blank line between frames
                pos = 0
                continue
            match = _HEADER_LINE.fullmatch(line)
            if match is None or pos > MAX_HEADER_BLOCK:
                raise FramingError(f"not a header line: {line[:40]!r}")
            headers[match[1].lower()] = match[2]

    async def _read_body(self, length: int) -> bytes | None:
        """Exactly ``length`` bytes (None at the end of input). A client that stops sending while
        the partial body already holds another frame's header sent a length too long."""
        while len(self._buf) < length:
            if await self._fill(timeout=STALL_S):
                continue
            if self._eof:
                return None
            if _GLUED_FRAME.search(self._buf):
                raise FramingError(
                    f"Content-Length {length}, but the body stopped after {len(self._buf)} bytes"
                )
        body = bytes(self._buf[:length])
        del self._buf[:length]
        return body

    async def _resync(self, skip: int) -> bool:
        """Drop bytes up to the next ``Content-Length`` (case-insensitive, anywhere: a body has no
        newline after it), keeping at most a few bytes while scanning. False at the end."""
        del self._buf[:skip]
        while True:
            match = _HEADER_START.search(self._buf)
            if match is not None:
                del self._buf[: match.start()]
                return True
            del self._buf[: max(0, len(self._buf) - _KEEP)]
            if not await self._fill():
                return False


def _content_length(headers: dict[bytes, bytes]) -> int:
    """The body's length from the headers (names already lower-cased), or why it has none."""
    raw = headers.get(b"content-length")
    if raw is None:
        raise FramingError("no Content-Length header")
    if not (raw.isascii() and raw.isdigit()):
        raise FramingError(f"Content-Length {raw[:20]!r} is not a number")
    if len(raw) > 12 or int(raw) > MAX_BODY:
        raise FramingError(f"Content-Length {raw[:20].decode()} is over {MAX_BODY // 2**20} MB")
    return int(raw)


async def run_frames(
    stop_event: threading.Event, source: ByteSource, receive: Callable[[bytes], bool]
) -> None:
    """The message loop: each body goes to ``receive``, which says whether it was a JSON message;
    one that was not sends the reader looking for the next header inside it."""
    frames = FrameReader(source)
    while not stop_event.is_set():
        body = await frames.next_body()
        if body is None:
            break
        if not receive(body):
            frames.reject(body)
