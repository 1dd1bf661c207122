"""``citewise suggest`` and ``citewise serve --tcp`` as a user runs them."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..lsp_harness import ACM_DRAFT as DRAFT
from ..lsp_harness import ACM_REFS as REFS

pytestmark = [pytest.mark.slow]


def _citewise(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The installed ``citewise`` script, as users run it (``-m citewise.cli`` would make the CLI's
    ``UserError`` a ``__main__`` class that subcommand modules cannot raise)."""
    script = Path(sys.executable).with_name("citewise")
    cmd = (
        [str(script)]
        if script.exists()
        else [sys.executable, "-c", "import sys, citewise.cli as c; sys.exit(c.main())"]
    )
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout)


def test_suggest_json_and_text(tmp_path: Path, lsp_store: Path) -> None:
    (tmp_path / "draft.tex").write_text(
        DRAFT.replace(r"\citep{foo2020, }", r"\citep{foo2020, 10.1145/3077136.3080832}")
    )
    (tmp_path / "refs.bib").write_text(REFS)
    proc = _citewise("suggest", str(tmp_path / "draft.tex"), "--store", str(lsp_store), "--json", "-k", "4")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["title"] == "Neural ranking models for ad-hoc retrieval"
    assert [p["marker"] for p in out["placeholders"]] == [r"\cite{}", r"\cite{?}"]
    assert all(len(p["suggestions"]) == 4 for p in out["placeholders"])
    assert "weak supervision" in " ".join(s["title"].lower() for s in out["placeholders"][0]["suggestions"])
    assert len(out["draft_suggestions"]) == 4
    assert "10.1145/3077136.3080832" not in {s["key"] for s in out["draft_suggestions"]}  # already cited
    text = _citewise("suggest", str(tmp_path / "draft.tex"), "--store", str(lsp_store), "-k", "2")
    assert text.returncode == 0 and "draft.tex:8:" in text.stdout and "For the whole draft:" in text.stdout


def test_suggest_user_errors(tmp_path: Path) -> None:
    proc = _citewise("suggest", str(tmp_path / "nope.tex"), "--store", str(tmp_path / "s.sqlite"))
    assert proc.returncode == 1 and "no such file" in proc.stderr and "Traceback" not in proc.stderr
    (tmp_path / "x.txt").write_text("hello")
    proc = _citewise("suggest", str(tmp_path / "x.txt"), "--store", str(tmp_path / "s.sqlite"))
    assert proc.returncode == 1 and "not a LaTeX or Markdown draft" in proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_tcp_initializes(tmp_path: Path, lsp_store: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "citewise.cli",
            "serve",
            "--tcp",
            f"127.0.0.1:{port}",
            "--store",
            str(lsp_store),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"processId": None, "rootUri": None, "capabilities": {}},
            }
        ).encode()
        conn.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        data = b""
        while b'"id": 1' not in data and b'"id":1' not in data:
            chunk = conn.recv(65536)
            assert chunk, data
            data += chunk
        reply = json.loads(data.split(b"\r\n\r\n", 1)[1][: int(data.split(b"\r\n")[0].split(b":")[1])])
        caps = reply["result"]["capabilities"]
        assert caps["completionProvider"]["resolveProvider"] is True
        assert set(caps["executeCommandProvider"]["commands"]) >= {
            "citewise.suggestForDraft",
            "citewise.reindex",
            "citewise.insertCitation",
        }
        assert caps["codeActionProvider"] and caps["hoverProvider"] and caps["definitionProvider"]
        conn.close()
    finally:
        proc.terminate()
        proc.wait(10)
