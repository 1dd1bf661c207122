"""Helpers shared by the kill -9 tests (``test_faults.py``: ``citewise index``;
``test_faults_server.py``: the server's reindex): the commands, process polling, and what a
store must still be after a kill."""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

from citewise.indexer.store import Store

# Words the small synthetic stores of the fault tests draw their titles from.
TITLE_WORDS = [
    "retrieval", "ranking", "neural", "query", "expansion", "citation", "graph", "evaluation",
    "learning", "feedback", "index", "compression", "user", "click", "model",
]  # fmt: skip


def _index_cmd(files: list[Path], store: Path) -> list[str]:
    # --embed: the fault runs cover the embedding stage too (a default index skips it).
    return [
        sys.executable,
        "-m",
        "citewise.cli",
        "index",
        *map(str, files),
        "--store",
        str(store),
        "-q",
        "--embed",
    ]


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _gone(pid: int, timeout: float = 10.0) -> bool:
    """Poll until ``pid`` no longer runs (a zombie of ours counts as gone)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            status = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            return True
        if status == "Z":
            return True
        time.sleep(0.05)
    return False


def _committed(store_path: Path) -> dict[str, str]:
    """DOI -> title of every paper in the store, read by a fresh connection."""
    conn = sqlite3.connect(store_path)
    try:
        return dict(conn.execute("SELECT doi, title FROM papers WHERE doi != ''"))
    finally:
        conn.close()


def _check_store(store_path: Path, before: dict[str, str]) -> dict[str, str]:
    """The store after a kill: opens, is intact, lost nothing that was committed."""
    store = Store(store_path, create=False)
    try:
        conn = store.conn
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO papers_fts(papers_fts) VALUES ('integrity-check')")  # FTS matches papers
        for path, papers in conn.execute("SELECT path, papers FROM sources").fetchall():
            held = conn.execute("SELECT count(*) FROM paper_sources WHERE source=?", (path,)).fetchone()[0]
            assert held == papers, f"{path}: {held} papers held, {papers} recorded"
    finally:
        store.close()
    now = _committed(store_path)
    lost = set(before) - set(now)
    assert not lost, f"{len(lost)} committed papers lost, e.g. {sorted(lost)[:3]}"
    return now


class _Encoder:
    """Deterministic hashed bag-of-words vectors: fast and torch-free."""

    dim = 16
    model_hash = "fault-test"

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for w in text.lower().split():
            v[sum(map(ord, w)) % self.dim] += 1.0
        return v / max(float(np.linalg.norm(v)), 1e-6)

    def encode_papers(self, papers) -> np.ndarray:
        if not papers:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vec(p.title + " " + p.abstract) for p in papers])
