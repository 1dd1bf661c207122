"""The append-only vector cache kept beside a store (``indexer/vector_cache.py``): what it keeps
across a kill, whose vectors it serves, and appends from two processes at once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np

from citewise.indexer.vector_cache import VectorCache, text_key

DIM = 8
N = 2000


def _writer(folder: str, first: int, barrier) -> None:
    cache = VectorCache(Path(folder), "v", DIM, "h")
    barrier.wait()  # both start appending together
    for i in range(first, first + N):  # one entry an append: as many chances to interleave as can be
        cache.append([i], np.full((1, DIM), i, dtype=np.float32))


def test_entries_come_back_as_appended_and_a_torn_tail_is_neither_read_nor_kept(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "c", "v", DIM, "h")
    assert cache.read()[0].size == 0  # nothing yet, no folder made by reading
    cache.append([5, 7], np.arange(2 * DIM, dtype=np.float32).reshape(2, DIM))
    keys, vecs = cache.read()
    assert keys.tolist() == [5, 7] and vecs[1, 0] == DIM
    with open(cache.vecs_path, "ab") as fh:  # killed after the vector's first bytes
        fh.write(b"\0" * 5)
    assert cache.read()[0].tolist() == [5, 7]
    cache.append([9], np.ones((1, DIM), np.float32))
    assert cache.read()[0].tolist() == [5, 7, 9] and cache.vecs_path.stat().st_size == 3 * DIM * 4
    assert VectorCache(tmp_path / "c", "v", DIM, "other").read()[0].size == 0  # another model's: unread
    cache.keep_last(1)
    keys, vecs = cache.read()
    assert keys.tolist() == [9] and np.array_equal(vecs, np.ones((1, DIM), np.float32))
    assert text_key(3, "a  b") == text_key(3, "a b") != text_key(4, "a b")


def test_two_processes_appending_at_once_keep_every_key_with_its_own_vector(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), start, barrier)) for start in (0, 10_000)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    keys, vecs = VectorCache(tmp_path, "v", DIM, "h").read()
    assert sorted(keys.tolist()) == list(range(N)) + list(range(10_000, 10_000 + N))
    assert np.array_equal(vecs[:, 0], keys.astype(np.float32)) and np.all(vecs == vecs[:, :1])
