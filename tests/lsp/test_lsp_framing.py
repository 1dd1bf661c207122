"""D9 (issue 43): one bad frame or one undecodable request must not make the server deaf.

The real ``citewise serve`` is spoken to in raw bytes on stdin/stdout: after each kind of bad
frame (wrong, non-numeric, negative, missing or huge ``Content-Length``, LF-only headers, garbage)
the next well-formed request is answered; a request whose params do not decode is answered with
``-32602`` by its id, one without a method with ``-32600``; no ``window/showMessage`` popup. The
reader itself (:mod:`citewise.server.framing`) is also checked in-process for bounded memory.
"""

from __future__ import annotations

import asyncio
import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

import pytest

from citewise.server import framing

from ..conftest import server_command

TIMEOUT = 30  # seconds for any one answer: the server answers these in milliseconds

INIT_PARAMS = {"processId": None, "rootUri": None, "capabilities": {}}


def body(msg_id: int | None, method: str, params: Any = None) -> bytes:
    payload: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if msg_id is not None:
        payload["id"] = msg_id
    return json.dumps(payload).encode()


def frame(data: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


class RawServer:
    """``citewise serve`` on pipes; a thread parses what it writes into a queue of messages."""

    def __init__(self, tmp_path: Path) -> None:
        self.proc = subprocess.Popen(
            server_command("--store", str(tmp_path / "s.sqlite")),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.messages: queue.Queue[dict | None] = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True).start()

    def _pump(self, out: IO[bytes]) -> None:
        while True:
            length = None
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line or length is None:
                self.messages.put(None)
                return
            self.messages.put(json.loads(out.read(length)))

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw)
        self.proc.stdin.flush()

    def response(self, msg_id: int) -> dict:
        """The answer to ``msg_id`` (failing after TIMEOUT seconds: a deaf server)."""
        while True:
            try:
                msg = self.messages.get(timeout=TIMEOUT)
            except queue.Empty:
                pytest.fail(f"no answer to request {msg_id} in {TIMEOUT} s: the server is deaf")
            assert msg is not None, "the server closed its output"
            self.seen.append(msg)
            if msg.get("id") == msg_id and "method" not in msg:
                return msg

    def ask(self, msg_id: int, method: str, params: Any = None) -> dict:
        self.send(frame(body(msg_id, method, params)))
        return self.response(msg_id)

    def finish(self) -> bytes:
        """Shut down cleanly (proving the server still listens) and return its stderr."""
        assert "result" in self.ask(9001, "shutdown")
        self.send(frame(body(None, "exit")))
        try:
            self.proc.wait(timeout=TIMEOUT)
        finally:
            self.close()
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=TIMEOUT)
        assert self.proc.stdin is not None
        self.proc.stdin.close()


@pytest.fixture
def server(tmp_path: Path):
    srv = RawServer(tmp_path)
    yield srv
    srv.close()
    assert srv.proc.stderr is not None
    srv.proc.stderr.close()


INIT = body(1, "initialize", INIT_PARAMS)

BAD_FRAMES = {
    "length too short": b"Content-Length: %d\r\n\r\n" % (len(INIT) - 5) + INIT,
    "length too long by a few bytes": b"Content-Length: %d\r\n\r\n" % (len(INIT) + 5) + INIT,
    "length too long by more than the next frame": b"Content-Length: %d\r\n\r\n" % (len(INIT) + 4000) + INIT,
    "non-numeric length": b"Content-Length: abc\r\n\r\n" + INIT,
    "negative length": b"Content-Length: -12\r\n\r\n" + INIT,
    "no length": b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + INIT,
    "huge length": b"Content-Length: 99999999999999999999\r\n\r\n" + INIT,
    "not a header": b"hello there\r\n\r\n" + INIT,
    "a body that is not JSON": frame(b"{this is not json"),
    "binary garbage": bytes(range(256)) * 40,
}


@pytest.mark.parametrize("bad", list(BAD_FRAMES), ids=list(BAD_FRAMES))
def test_the_next_frame_is_answered_after_a_bad_one(server: RawServer, bad: str) -> None:
    server.send(BAD_FRAMES[bad])
    answer = server.ask(2, "initialize", INIT_PARAMS)
    assert answer["result"]["serverInfo"]["name"] == "citewise"
    assert not any(m.get("id") == 1 for m in server.seen), "the bad frame was answered"
    err = server.finish()
    assert b"Traceback" not in err
    assert b"LSP framing error" in err or b"not JSON" in err, err.decode(errors="replace")


def test_lf_only_and_lowercase_headers_are_frames(server: RawServer) -> None:
    server.send(b"content-length: %d\n\n" % len(INIT) + INIT)
    assert "result" in server.response(1)
    server.send(b"\r\n" + frame(body(2, "workspace/executeCommand", {"command": "citewise.status"})))
    assert "result" in server.response(2)
    server.finish()


POS = {"textDocument": {"uri": "file:///x.tex"}, "position": {"line": 0, "character": 0}}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({**POS, "position": {"line": -1, "character": 0}}, "position"),
        ({**POS, "position": {"line": 2**63, "character": 0}}, "position"),
        ({"textDocument": {"uri": "file:///x.tex"}}, "position"),
        ({**POS, "textDocument": 7}, "textDocument"),
    ],
    ids=["line -1", "line 2^63", "no position", "textDocument a number"],
)
def test_undecodable_params_are_answered_invalid_params(server: RawServer, params: dict, field: str) -> None:
    assert "result" in server.ask(1, "initialize", INIT_PARAMS)
    answer = server.ask(5, "textDocument/completion", params)
    assert answer["error"]["code"] == -32602 and field in answer["error"]["message"]
    assert "traceback" not in json.dumps(answer).lower()
    assert "result" in server.ask(6, "initialize", INIT_PARAMS)  # still listening
    server.finish()
    assert not [m for m in server.seen if m.get("method") == "window/showMessage"]


@pytest.mark.parametrize(
    "raw",
    [
        {"jsonrpc": "2.0", "id": 7},
        {"jsonrpc": "2.0", "id": 7, "params": {}},
        {"jsonrpc": "1.0", "id": 7, "method": "shutdown"},
        {"id": 7, "method": "shutdown"},
        {"jsonrpc": "2.0", "id": 7, "method": 42},
    ],
    ids=["no method", "params but no method", "jsonrpc 1.0", "no jsonrpc", "method a number"],
)
def test_invalid_requests_are_answered_invalid_request(server: RawServer, raw: dict) -> None:
    server.send(frame(json.dumps(raw).encode()))
    assert server.response(7)["error"]["code"] == -32600
    server.finish()


def test_malformed_messages_without_id_are_logged_not_shown(server: RawServer) -> None:
    assert "result" in server.ask(1, "initialize", INIT_PARAMS)
    for raw in (
        {"jsonrpc": "2.0"},
        {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": 3}},
        {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {}},
        [{"jsonrpc": "2.0", "id": 3, "method": "shutdown"}],
        "a string",
    ):
        server.send(frame(json.dumps(raw).encode()))
    assert "result" in server.ask(4, "workspace/executeCommand", {"command": "citewise.status"})
    server.finish()
    assert not [m for m in server.seen if m.get("method") == "window/showMessage"]
    assert not any(m.get("id") == 3 for m in server.seen)


def test_a_request_after_shutdown_is_refused_not_ignored(server: RawServer) -> None:
    assert "result" in server.ask(1, "shutdown")
    assert (
        server.ask(2, "workspace/executeCommand", {"command": "citewise.status"})["error"]["code"] == -32600
    )
    server.send(frame(body(None, "exit")))
    server.proc.wait(timeout=TIMEOUT)


# -- the reader on its own -------------------------------------------------------------------------


class ChunkSource:
    """Given chunks, then the end of input; records the most bytes the reader ever held."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)
        self.reader: framing.FrameReader | None = None
        self.most = 0

    async def read(self) -> bytes:
        if self.reader is not None:
            self.most = max(self.most, len(self.reader._buf))
        return self.chunks.pop(0) if self.chunks else b""


def read_all(chunks: list[bytes]) -> tuple[list[bytes], int]:
    """Every body the reader yields (non-JSON ones rejected as the server does), and the largest
    buffer it held."""

    async def run() -> tuple[list[bytes], int]:
        source = ChunkSource(chunks)
        reader = source.reader = framing.FrameReader(source)
        bodies = []
        while (got := await reader.next_body()) is not None:
            try:
                json.loads(got)
                bodies.append(got)
            except ValueError:
                reader.reject(got)
        return bodies, source.most

    return asyncio.run(asyncio.wait_for(run(), TIMEOUT))


def test_frames_split_anywhere_are_read_whole() -> None:
    stream = frame(b'{"a": 1}') + b"Content-Length: 8\n\n" + b'{"b": 2}' + frame(b'{"c": 3}')
    for size in (1, 3, 7, 64):
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert read_all(chunks)[0] == [b'{"a": 1}', b'{"b": 2}', b'{"c": 3}']


def test_resync_scans_garbage_in_bounded_memory() -> None:
    garbage = [b"x" * 65536] * 160  # 10 MB without a header
    bodies, most = read_all([b"Content-Length: -1\r\n\r\n", *garbage, frame(b'{"ok": true}')])
    assert bodies == [b'{"ok": true}'] and most < 200_000


def test_a_header_split_across_reads_during_resync_is_found() -> None:
    good = frame(b'{"ok": 1}')
    assert read_all([b"Content-Length: x\r\n\r\nzzzz" + good[:9], good[9:]])[0] == [b'{"ok": 1}']
