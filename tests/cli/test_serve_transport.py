"""``citewise serve`` over TCP: loopback by default, a token for anything else, clear mistakes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from citewise.cli import main
from citewise.indexer.store import Store
from citewise.server.transport import is_loopback

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--tcp", "127.0.0.1:70000"], "port from 1 to 65535"),
        (["--tcp", "localhost:99999"], "port from 1 to 65535"),
        (["--tcp", "localhost:http"], "port from 1 to 65535"),
        (["--tcp", "0.0.0.0:2087"], "not a loopback address"),
        (["--tcp", "0.0.0.0:2087", "--allow-remote"], "needs a token"),
        (["--allow-remote"], "goes with --tcp"),
    ],
)
def test_serve_mistakes_are_one_clear_line(argv: list[str], fragment: str, capsys, monkeypatch) -> None:
    monkeypatch.delenv("CITEWISE_TOKEN", raising=False)
    assert main(["serve", *argv]) == 1
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_port_in_use_is_reported(capsys) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--tcp", f"127.0.0.1:{port}"]) == 1
    assert "cannot listen there" in capsys.readouterr().err


def test_loopback_names() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.7")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _frame(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_message(sock: socket.socket) -> dict:
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(4096)
        assert chunk, "connection closed"
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = int(
        next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1]
    )
    while len(rest) < length:
        rest += sock.recv(4096)
    return json.loads(rest[:length])


def _response(sock: socket.socket, msg_id: int) -> dict:
    while True:
        msg = _read_message(sock)
        if msg.get("id") == msg_id and "method" not in msg:
            return msg


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "papers.sqlite"
    from citewise.indexer.importer import import_sources

    st = Store(path)
    import_sources(st, [str(EXAMPLES / "library.bib")])
    st.close()
    return path


def test_tcp_server_says_where_it_listens_and_checks_the_token(store: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "citewise.cli",
            "serve",
            "--store",
            str(store),
            "--tcp",
            f"127.0.0.1:{port}",
            "--token",
            "s3cret",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        line = proc.stderr.readline().decode()
        assert f"listening on 127.0.0.1:{port}" in line
        sock = None
        for _ in range(200):  # poll until the socket accepts
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                time.sleep(0.05)
        assert sock is not None
        with sock:
            # Before initialize: refused. A wrong token: refused. The right one: served.
            sock.sendall(
                _frame(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "workspace/executeCommand",
                        "params": {"command": "citewise.reindex", "arguments": []},
                    }
                )
            )
            assert _response(sock, 1)["error"]["code"] == -32002
            sock.sendall(
                _frame(
                    {
                        "jsonrpc": "2.0",
                        "id": 2,
                        "method": "initialize",
                        "params": {
                            "processId": None,
                            "rootUri": None,
                            "capabilities": {},
                            "initializationOptions": {"token": "wrong"},
                        },
                    }
                )
            )
            assert "error" in _response(sock, 2)
            sock.sendall(
                _frame(
                    {
                        "jsonrpc": "2.0",
                        "id": 3,
                        "method": "initialize",
                        "params": {
                            "processId": None,
                            "rootUri": None,
                            "capabilities": {},
                            "initializationOptions": {"token": "s3cret"},
                        },
                    }
                )
            )
            ok = _response(sock, 3)
            assert "result" in ok and ok["result"]["serverInfo"]["name"] == "citewise"
            sock.sendall(_frame({"jsonrpc": "2.0", "id": 4, "method": "shutdown", "params": None}))
            assert "result" in _response(sock, 4)
            sock.sendall(_frame({"jsonrpc": "2.0", "method": "exit", "params": None}))
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()


def test_serve_run_by_hand_in_a_terminal_says_what_it_is(tmp_path: Path) -> None:
    """With a terminal on stdin the server says on stderr that it speaks LSP on stdio (and nothing
    on stdout, the protocol's channel); started by an editor (pipes) it says nothing."""
    import os
    import pty

    controller, terminal = pty.openpty()
    env = {**os.environ, "CITEWISE_STORE": str(tmp_path / "s.sqlite")}
    cmd = [sys.executable, "-m", "citewise.cli", "serve"]
    proc = subprocess.Popen(cmd, stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    os.close(terminal)
    try:
        line = proc.stderr.readline().decode() if proc.stderr else ""  # type: ignore[union-attr]
    finally:
        proc.kill()
        out, _err = proc.communicate(timeout=30)
        os.close(controller)
    assert "speaks LSP on stdin/stdout" in line and "docs/editors.md" in line, line
    assert out == b""
    piped = subprocess.run(cmd, input=b"", capture_output=True, env=env, timeout=60)
    assert b"speaks LSP" not in piped.stderr
