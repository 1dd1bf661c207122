"""Faults: the language server killed with SIGKILL in the middle of a ``citewise.reindex``.

What must hold (issue 15, "Faults"): whatever instant the server dies at, the store and the
indexes beside it (``.bm25/``, ``.dense/``) that were serving stay intact and serve on restart,
and the next ``citewise index`` completes. Each seeded run copies a store built once from a few
real ACM-CR files, starts the real server on the copy (stdio, raw JSON-RPC framing so the
process can be killed at once), asks for a forced reindex that has real work to do (the .bib
files grew since the store was built: new papers to import, embed and index), and kills the
server after a random delay drawn over the whole measured length of a reindex. Then: SQLite and
FTS5 integrity, no committed paper lost, the BM25 index loads clean, ``citewise search`` finds a
paper from before, a fresh server answers a completion inside ``\\cite{}`` and reports nothing
damaged, the dense rows that were serving are all there, and a new ``citewise index`` completes
(every paper in and embedded, no temporary index files left).

What a reindex writes (measured, 275 papers): one SQLite transaction per .bib, then the new
papers' vectors appended to ``.dense/`` (``emb.f32``, ``rows.i64``, ``meta.json`` replaced),
then a new recommender. A change this small does not rewrite ``.bm25/`` (the saved index is
served with an in-memory delta up to ``bm25_files.MAX_DELTA`` changed papers); the kill -9 of a BM25
save is covered by ``test_faults.py`` (``citewise index`` rebuilds it).
"""

from __future__ import annotations

import json
import os
import queue
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from citewise.indexer import bm25_files

from ..conftest import ACM_DL, require, server_command
from ..fault_helpers import TITLE_WORDS, _check_store, _children, _committed, _gone, _index_cmd

KILL_RUNS = int(
    os.environ.get("CITEWISE_FAULT_RUNS", "20")
)  # kills mid-reindex; fewer only to debug the test
SEED = 1515
TIMEOUT = 120.0  # generous: only a state that never comes reaches it
STORE_NAME = "papers.sqlite"
DRAFT = (
    "\\documentclass{article}\n\\begin{document}\n"
    "Search engines rank documents for a query with retrieval models and user feedback "
    "\\cite{}.\n\\end{document}\n"
)


# -- a minimal LSP client over stdio: raw framing, so the server can be killed at any instant ------
class RawServer:
    """``citewise serve --store STORE`` as a subprocess; messages read by a thread into a queue."""

    def __init__(self, store: Path, root: Path, log: Path, env: dict[str, str]) -> None:
        self.log = log
        self._err = open(log, "wb")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            server_command("--store", str(store)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            cwd=root,
            env=env,
        )
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        try:
            while True:
                length = None
                while (line := out.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode("ascii").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                if not line or length is None:
                    break
                msg = json.loads(out.read(length))
                if "method" in msg and "id" in msg:  # a request to the client: answer it plainly
                    self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
                self.messages.put(msg)
        except (OSError, ValueError):
            pass
        self.messages.put(None)  # the stream ended

    def _send(self, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # killed: nothing more is read

    def request(self, method: str, params: Any) -> int:
        self._next_id += 1
        self._send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_for(self, match, timeout: float = TIMEOUT) -> dict[str, Any] | None:
        """The first message (already seen or to come) that ``match`` accepts; None at the timeout."""
        for msg in self.seen:
            if match(msg):
                return msg
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            try:
                msg = self.messages.get(timeout=left)
            except queue.Empty:
                break
            if msg is None:
                raise AssertionError(f"the server ended before the message came; log:\n{self.tail()}")
            self.seen.append(msg)
            if match(msg):
                return msg
        return None

    def response(self, rid: int, timeout: float = TIMEOUT) -> dict[str, Any]:
        msg = self.wait_for(lambda m: m.get("id") == rid and "method" not in m, timeout)
        assert msg is not None, f"no answer to request {rid} in {timeout} s; log:\n{self.tail()}"
        assert "error" not in msg, msg
        return msg

    def start(self, root: Path) -> None:
        """initialize (workspace .bib import off) and wait for "citewise ready"."""
        rid = self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "capabilities": {},
                "initializationOptions": {"importWorkspaceBibs": False},
            },
        )
        self.response(rid)
        self.notify("initialized", {})
        ready = self.wait_for(
            lambda m: m.get("method") == "window/logMessage" and "citewise ready" in m["params"]["message"]
        )
        assert ready is not None, f"no 'citewise ready' in {TIMEOUT} s; log:\n{self.tail()}"

    def kill9(self) -> None:
        children = _children(self.proc.pid)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=TIMEOUT)
        assert all(_gone(c) for c in children), "a child process outlived the killed server"

    def stop(self) -> None:
        """shutdown + exit, the way an editor quits."""
        self.response(self.request("shutdown", None))
        self.notify("exit", None)
        self.proc.wait(timeout=TIMEOUT)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass
        self._err.close()

    def tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def _serving_env(tmp: Path) -> dict[str, str]:
    """The environment of every citewise subprocess: a serving-only install (no train extra).

    Why: with torch installed, every ``citewise`` command imports it while building its argument
    parser (``cli_models._add_train_arguments`` reads ``hatten_train.TrainConfig``), 3-4 s per
    process here; serving, indexing and searching never use torch (ONNX), so a blocked import
    keeps 80 process starts affordable without changing what is tested.
    """
    stub = tmp / "no-train-extra" / "torch"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "__init__.py").write_text('raise ImportError("torch: not installed (serving-only install)")\n')
    path = [str(stub.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "CITEWISE_LOG": "WARNING"}


_SAYS = ("window/logMessage", "window/showMessage")  # type 1: error, 2: warning


def _copy_store(src_dir: Path, dest_dir: Path) -> Path:
    """The store and everything ``citewise index`` wrote beside it (-wal, .bm25/, .dense/)."""
    dest_dir.mkdir(parents=True)
    for path in src_dir.glob(STORE_NAME + "*"):
        (shutil.copytree if path.is_dir() else shutil.copy2)(path, dest_dir / path.name)
    return dest_dir / STORE_NAME


def _paper_count(store: Path) -> int:
    conn = sqlite3.connect(store)
    try:
        return conn.execute("SELECT count(*) FROM papers").fetchone()[0]
    finally:
        conn.close()


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".tmp" in p.name or ".old" in p.name]


def _dense_meta(store: Path) -> dict[str, Any]:
    """The dense index's meta.json ({} when no model is installed, so none was built)."""
    path = store.with_name(store.name + ".dense") / "meta.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _dense_rows(store: Path) -> int:
    """Papers embedded so far (rows appended to the dense index, whole or not yet indexed)."""
    path = store.with_name(store.name + ".dense") / "rows.i64"
    return path.stat().st_size // 16 if path.exists() else 0


@dataclass
class Fixture:
    pristine: Path  # the folder holding the store as built
    bibs: list[Path]  # its sources, grown since (so a forced reindex imports, embeds, indexes)
    before: dict[str, str]  # DOI -> title committed in the pristine store
    reindex_seconds: float  # one full reindex, measured from the request to its answer
    pristine_papers: int  # papers in the store as built
    papers: int  # papers in the store once the grown sources are imported
    env: dict[str, str]  # of the citewise subprocesses


def _reindex_params() -> dict[str, Any]:
    return {"command": "citewise.reindex", "arguments": [{"force": True}]}


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Fixture:
    """A store of three small real ACM-CR files (with its BM25 and dense indexes), whose .bib
    files then grow by three more; and how long the server's forced reindex of it takes."""
    require(ACM_DL)
    rng = random.Random(SEED)
    pool = sorted(p for p in ACM_DL.rglob("*.bib") if 20_000 < p.stat().st_size < 60_000)
    if len(pool) < 12:
        pytest.skip(f"too few small ACM-CR files under {ACM_DL}")
    picked = rng.sample(pool, 6)
    top = tmp_path_factory.mktemp("served")
    env = _serving_env(top)
    (top / "bibs").mkdir()
    bibs = [top / "bibs" / f"lib{i}.bib" for i in range(3)]
    for src, bib in zip(picked, bibs, strict=False):
        shutil.copy(src, bib)
    pristine = top / "pristine"
    pristine.mkdir()
    built = subprocess.run(
        _index_cmd(bibs, pristine / STORE_NAME), capture_output=True, text=True, timeout=300, env=env
    )
    assert built.returncode == 0, built.stderr
    before = _committed(pristine / STORE_NAME)
    assert len(before) > 20
    dense = _dense_meta(pristine / STORE_NAME)
    # The sources grow after the store was built: a forced reindex has papers to import and embed.
    for bib, extra in zip(bibs, picked[3:], strict=False):
        with open(bib, "a", encoding="utf-8") as fh:
            fh.write("\n" + extra.read_text(encoding="utf-8"))
    # One full reindex, measured: the kill delays are drawn over its whole length.
    work = top / "measure"
    store = _copy_store(pristine, work)
    server = RawServer(store, top, work / "server.log", env)
    try:
        server.start(top)
        t0 = time.monotonic()
        answer = server.response(server.request("workspace/executeCommand", _reindex_params()))
        seconds = time.monotonic() - t0
        server.stop()
    finally:
        server.close()
    result = answer["result"]
    assert result["done"] and result["imported"] > 0 and result["papers"] > len(before), result
    if dense:  # the reindex embedded the new papers: it wrote the dense index too
        assert _dense_meta(store)["valid"] == result["papers"] > dense["valid"]
    print(
        f"\nstore: {len(before)} papers with a DOI; full reindex: {seconds:.2f} s, {result}; "
        f"dense index: {'yes' if dense else 'no model installed'}"
    )
    shutil.rmtree(work)
    return Fixture(
        pristine=pristine,
        bibs=bibs,
        before=before,
        reindex_seconds=seconds,
        pristine_papers=_paper_count(pristine / STORE_NAME),
        papers=result["papers"],
        env=env,
    )


@pytest.mark.slow
def test_kill_9_during_server_reindex_at_random_points(served: Fixture, tmp_path: Path) -> None:
    """Seeded runs until 20 kills landed mid-reindex: the server on a copy of the store, a forced
    reindex, kill -9 after a delay drawn from 0 to the length of a full reindex (a reindex that
    answers first is killed too, and checked the same); then the store and indexes are checked."""
    rng = random.Random(SEED)
    draft = tmp_path / "draft.tex"
    draft.write_text(DRAFT, encoding="utf-8")
    lines = DRAFT.split("\n")
    cite_line = next(i for i, x in enumerate(lines) if "\\cite{}" in x)
    cite_at = {"line": cite_line, "character": lines[cite_line].index("\\cite{}") + len("\\cite{")}
    pristine_dense = _dense_meta(served.pristine / STORE_NAME)
    outcomes: list[str] = []
    killed = 0
    t_start = time.monotonic()
    runs = 0
    while killed < KILL_RUNS and runs < 2 * KILL_RUNS:
        run, runs = runs, runs + 1
        work = tmp_path / f"run{run}"
        store = _copy_store(served.pristine, work)
        delay = rng.uniform(0.0, served.reindex_seconds)
        server = RawServer(store, tmp_path, work / "server.log", served.env)
        try:
            server.start(tmp_path)
            rid = server.request("workspace/executeCommand", _reindex_params())
            answered = server.wait_for(lambda m, rid=rid: m.get("id") == rid, timeout=delay) is not None
            server.kill9()
        finally:
            server.close()
        killed += not answered
        # How far it got: papers committed, papers embedded (the kill points cover both stages).
        imported = _paper_count(store) - served.pristine_papers
        embedded = _dense_rows(store) - _dense_rows(served.pristine / STORE_NAME)
        outcomes.append(f"{'done<' if answered else 'kill@'}{delay:.2f}s +{imported}p +{embedded}e")
        where = f"run {run} ({outcomes[-1]})"

        # The store: SQLite and FTS5 intact, every paper committed before still there.
        _check_store(store, served.before)
        # The BM25 index that was serving (or the one saved since) loads without a problem.
        index, problem = bm25_files.load_checked(store.with_name(store.name + ".bm25"))
        assert index is not None and not problem, f"{where}: BM25 index damaged: {problem}"
        # `citewise search` answers from the store and finds a paper from before the reindex.
        doi = rng.choice(sorted(served.before))
        found = subprocess.run(
            [
                sys.executable,
                "-m",
                "citewise.cli",
                "search",
                served.before[doi],
                "--store",
                str(store),
                "--json",
                "-k",
                "10",
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=served.env,
        )
        assert found.returncode == 0, f"{where}: {found.stderr}"
        assert doi in {h["doi"] for h in json.loads(found.stdout)}, (
            f"{where}: {served.before[doi]!r} not found"
        )
        # A fresh server on the store answers a completion inside \cite{} (its indexes serve).
        server = RawServer(store, tmp_path, work / "restart.log", served.env)
        try:
            server.start(tmp_path)
            server.notify(
                "textDocument/didOpen",
                {"textDocument": {"uri": draft.as_uri(), "languageId": "latex", "version": 1, "text": DRAFT}},
            )
            answer = server.response(
                server.request(
                    "textDocument/completion", {"textDocument": {"uri": draft.as_uri()}, "position": cite_at}
                )
            )
            result = answer["result"]
            items = result["items"] if isinstance(result, dict) else result
            assert items, f"{where}: no completion items after the restart"
            server.stop()
        finally:
            server.close()
        # Nothing to report on restart: no warning or error (a damaged index would say so), no traceback.
        complaints = [
            m["params"]["message"]
            for m in server.seen
            if m.get("method") in _SAYS and m["params"]["type"] <= 2
        ]
        log = (work / "restart.log").read_text(errors="replace")
        assert not complaints and "Traceback" not in log, f"{where}: {complaints}\n{log[-3000:]}"
        if pristine_dense:  # the embeddings that were serving are all still there
            dense = _dense_meta(store)
            assert dense["model_hash"] == pristine_dense["model_hash"], where
            assert dense["valid"] >= pristine_dense["valid"], f"{where}: dense index lost rows: {dense}"
        # The next `citewise index` completes: every paper of the grown sources in, embedded, no
        # temporary index files left behind.
        again = subprocess.run(
            [*_index_cmd(served.bibs, store), "--json"],
            capture_output=True,
            text=True,
            timeout=300,
            env=served.env,
        )
        assert again.returncode == 0, f"{where}: {again.stderr}"
        assert json.loads(again.stdout)["broken"] == 0, where
        assert _paper_count(store) == served.papers, f"{where}: the next index did not bring in every paper"
        if pristine_dense:
            assert _dense_meta(store)["valid"] == served.papers, f"{where}: {_dense_meta(store)}"
        assert not _leftovers(work), f"{where}: temporary index files left behind: {_leftovers(work)}"
        shutil.rmtree(work)
    elapsed = time.monotonic() - t_start
    print(
        f"\nkill -9 runs: {killed} killed mid-reindex (+{runs - killed} answered first), delays "
        f"0-{served.reindex_seconds:.2f} s, {elapsed:.0f} s; {outcomes}"
    )
    # The kills must really land mid-reindex, or the test proves nothing.
    assert killed >= KILL_RUNS, outcomes


# -- the dense (float32) index file and its meta.json: the one kill point the runs above cannot reach --
_KILL_AROUND_INDEX_RENAME = """
import os, signal, sys
from citewise.indexer import ann
from citewise.indexer.store import Store
from tests.fault_helpers import _Encoder

real = ann.replace_file

def replace_and_die(tmp, final):
    if final.name == "index.f32.usearch" and sys.argv[2] == "before":  # the old file still in place
        os.kill(os.getpid(), signal.SIGKILL)
    real(tmp, final)
    if final.name == "index.f32.usearch":  # the new file in place, the final meta.json not written yet
        os.kill(os.getpid(), signal.SIGKILL)

ann.replace_file = replace_and_die
ann.AnnIndex(Store(sys.argv[1]), _Encoder(), exact_below=0).build()
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_kill_9_around_the_index_rename_keeps_the_index(tmp_path: Path, caplog, when: str) -> None:
    """A reindex that embedded new papers re-saves ``.dense/index.f32.usearch`` (temporary file, then
    rename) and writes ``meta.json`` with the file's size and SHA-256. A kill -9 just before or
    just after the rename leaves a complete, good index that the next opener must serve as it
    is, with no "damaged" warning and no rebuild from scratch.

    Stores under ``exact_below`` (5,000) papers have no index file, so the random runs above
    cannot reach this point; a real ACM-CR store (110k papers) re-saves the file on every
    reindex with new papers (an open with nothing new re-saves nothing). The kill is placed
    exactly there.
    """
    from citewise.indexer import ann
    from citewise.indexer.records import PaperRecord
    from citewise.indexer.store import Store

    from ..fault_helpers import _Encoder

    words = TITLE_WORDS
    rng = random.Random(SEED)

    def papers(prefix: str, n: int) -> list[PaperRecord]:
        return [
            PaperRecord(
                title=f"{' '.join(rng.sample(words, 4))} {prefix} {i}",
                abstract=" ".join(rng.choices(words, k=30)),
                doi=f"10.9/{prefix}{i}",
                year=2010,
            )
            for i in range(n)
        ]

    store = Store(tmp_path / STORE_NAME)
    store.import_source(str(tmp_path / "a.bib"), papers("a", 300), fmt="bibtex")
    enc = _Encoder()
    assert ann.AnnIndex(store, enc, exact_below=0).build()["exact"] is False
    store.import_source(str(tmp_path / "b.bib"), papers("b", 50), fmt="bibtex")  # new papers to embed
    repo = Path(__file__).resolve().parents[2]
    killed = subprocess.run(
        [sys.executable, "-c", _KILL_AROUND_INDEX_RENAME, str(store.path), when],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert killed.returncode == -signal.SIGKILL, f"the kill point was not reached: {killed.stderr[-2000:]}"
    with caplog.at_level("WARNING", logger="citewise.indexer.ann"):
        again = ann.AnnIndex(store, enc, exact_below=0)
        summary = again.build()
    complaints = [r.getMessage() for r in caplog.records]
    assert not complaints, f"the index the killed save put in place is not served as it is: {complaints}"
    assert summary["valid"] == 350 and summary["embedded"] == 0, summary
    meta = json.loads((again.folder / "meta.json").read_text())
    assert "pending_index" not in meta and meta["index_rows"] == 350, meta
    assert meta["index_bytes"] == (again.folder / "index.f32.usearch").stat().st_size
    assert not list(again.folder.glob("*.tmp*")), "the killed save's temporary file is left behind"
    target = store.find(doi="10.9/b7")
    assert again.search(enc.encode_papers([target])[0], 1)[0][0] == target.id


# -- the quantized (usearch int8) index: a long build checkpoints itself; kill -9 at a checkpoint --
_KILL_AT_A_CHECKPOINT = """
import os, signal, sys
from citewise.indexer import ann
from citewise.indexer.store import Store
from tests.fault_helpers import _Encoder

real = ann.replace_file
saves = []

def replace_and_die(tmp, final):
    saves.append(final.name)
    if len(saves) == 2 and sys.argv[2] == "before":  # the first checkpoint in place, the second not
        os.kill(os.getpid(), signal.SIGKILL)
    real(tmp, final)
    if len(saves) == 2:  # the second checkpoint in place, its meta.json not written yet
        os.kill(os.getpid(), signal.SIGKILL)

ann.replace_file = replace_and_die
ann.AnnIndex(Store(sys.argv[1]), _Encoder(), exact_below=0, quantize_above=0, checkpoint_rows=100).build()
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_kill_9_in_a_quantized_build_resumes_from_the_checkpoint(tmp_path: Path, caplog, when: str) -> None:
    """Embedding and indexing 10M papers takes hours, so the int8 index is saved every
    ``checkpoint_rows`` rows (temporary file, rename, meta.json). A kill -9 around a checkpoint's
    rename leaves a folder the next build resumes from: no "damaged" warning, rows past the
    checkpoint added, no temporary file left, and the index answers."""
    from citewise.indexer import ann
    from citewise.indexer.records import PaperRecord
    from citewise.indexer.store import Store

    from ..fault_helpers import _Encoder

    rng = random.Random(SEED)
    records = [
        PaperRecord(
            title=f"{' '.join(rng.sample(TITLE_WORDS, 4))} q {i}",
            abstract=" ".join(rng.choices(TITLE_WORDS, k=30)),
            doi=f"10.9/q{i}",
            year=2010,
        )
        for i in range(350)
    ]
    store = Store(tmp_path / STORE_NAME)
    store.import_source(str(tmp_path / "a.bib"), records, fmt="bibtex")
    killed = subprocess.run(
        [sys.executable, "-c", _KILL_AT_A_CHECKPOINT, str(store.path), when],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert killed.returncode == -signal.SIGKILL, f"the kill point was not reached: {killed.stderr[-2000:]}"
    folder = ann.index_folder(store)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["kind"] == "usearch-i8" and meta["index_rows"] == 100 and "pending_index" in meta, meta
    enc = _Encoder()
    with caplog.at_level("WARNING", logger="citewise.indexer.ann"):
        again = ann.AnnIndex(store, enc, exact_below=0, quantize_above=0, checkpoint_rows=100)
        summary = again.build()
    complaints = [r.getMessage() for r in caplog.records]
    assert not complaints, f"the checkpoint the killed build left is not resumed as it is: {complaints}"
    assert summary["valid"] == 350 and summary["embedded"] == 0 and summary["kind"] == "usearch-i8"
    meta = json.loads((folder / "meta.json").read_text())
    assert "pending_index" not in meta and meta["index_rows"] == 350, meta
    assert meta["index_bytes"] == (folder / "index.i8.usearch").stat().st_size
    assert not list(folder.glob("*.tmp*")), "the killed save's temporary file is left behind"
    target = store.find(doi="10.9/q321")
    assert again.search(enc.encode_papers([target])[0], 1)[0][0] == target.id
