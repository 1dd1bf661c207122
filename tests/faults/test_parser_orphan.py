"""``kill -9`` of ``citewise index`` never leaves its parser process behind.

The reproduction of the bad-input report: a large OpenAlex file (parsed ahead in a second
process) imported with its output piped, as in ``citewise index ... 2>&1 | tee log``; the
writer is killed while its parser has already queued the rest of the file (the moment the
parser used to block forever in its queue's feeder thread, holding the store's files and the
caller's pipe). The parser must be gone within a few seconds and the pipe's reader get EOF.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import SHARED_DATA, require
from ..fault_helpers import _children, _gone

REPO = Path(__file__).resolve().parents[2]
WORKS = 1_200  # ~19 MB of JSON: parsed ahead (over pipeline.MIN_BYTES), three chunks and the end

pytestmark = pytest.mark.skipif(
    (os.cpu_count() or 1) < 2 or not hasattr(os, "fork") or not Path("/proc/self/stat").exists(),
    reason="parsing ahead needs two cores and fork; the test reads /proc",
)


@pytest.fixture(scope="module")
def works_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``WORKS`` OpenAlex works with distinct ids, made by the import bench's generator from the
    real sample page."""
    require(SHARED_DATA / "samples" / "openalex")
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from bench_import_sources import _openalex  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(REPO / "bench"))
    path = tmp_path_factory.mktemp("orphan") / "works.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for work in _openalex(WORKS, random.Random(43)):
            fh.write(json.dumps(work) + "\n")
    return path


def _cpu_ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])  # utime + stime


def _until_idle(pid: int, quiet: float = 1.0, timeout: float = 60.0) -> None:
    """Wait until ``pid`` has used no CPU for ``quiet`` seconds: the parser has parsed all it can
    and is blocked (its writer is stopped and reads nothing)."""
    end = time.monotonic() + timeout
    last, since = _cpu_ticks(pid), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.1)
        now = _cpu_ticks(pid)
        if now is None or now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    raise AssertionError("the parser process never stopped working")


def _eof_within(fd: int, timeout: float) -> bool:
    """Read ``fd`` until EOF; whether EOF came within ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if ready and not os.read(fd, 65536):
            return True
    return False


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["parser-done", "mid-import"])
def test_kill_9_of_index_leaves_no_parser_and_closes_the_pipe(
    works_file: Path, tmp_path: Path, moment: str
) -> None:
    """``parser-done``: the writer is stopped as soon as its parser starts, the parser queues the
    whole file and blocks, then the writer gets ``kill -9``. ``mid-import``: ``kill -9`` one
    second into the import. Either way the parser is gone within 5 s and the pipe (stdout and
    stderr, as ``2>&1 | tee``) ends."""
    cmd = [
        sys.executable,
        "-m",
        "citewise.cli",
        "index",
        str(works_file),
        "--store",
        str(tmp_path / "s.sqlite"),
    ]
    proc = subprocess.Popen(
        [*cmd, "--no-embed", "--no-search-index"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    children: list[int] = []
    try:
        end = time.monotonic() + 120
        while not (children := _children(proc.pid)):
            assert proc.poll() is None, f"the import ended without a parser process: {proc.stdout.read()!r}"
            assert time.monotonic() < end, "no parser process in two minutes"
            time.sleep(0.02)
        if moment == "parser-done":
            proc.send_signal(signal.SIGSTOP)
            _until_idle(children[0])
        else:
            time.sleep(1.0)
        assert proc.poll() is None, "the import ended before the kill: make the file bigger"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert all(_gone(c, timeout=5) for c in children), "the parser process outlived its writer"
        assert _eof_within(proc.stdout.fileno(), 5), "the caller's pipe is still held open"
    finally:
        for pid in [proc.pid, *children]:  # ours, still running after a failure: stopped
            if not _gone(pid, timeout=0.1):
                os.kill(pid, signal.SIGKILL)
        proc.stdout.close()
