"""The compiled BM25 loop computes what the numpy expression it replaced computed, bit for bit
(``indexer/bm25_kernels.py``): every search's scores rest on it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from citewise.indexer import bm25_kernels as kernels


def posting_lists(seed: int, n_docs: int, lengths: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted, distinct posting lists of the given lengths, back to back (offsets, postings, impacts),
    with impacts spread over the range BM25 gives (so float32 rounding shows)."""
    rng = np.random.default_rng(seed)
    lists = [np.sort(rng.choice(n_docs, size=m, replace=False)) for m in lengths]
    postings = np.concatenate(lists).astype(np.int32)
    impacts = (rng.random(postings.shape[0]) * 9.0 + 0.01).astype(np.float32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return offsets, postings, impacts


@pytest.mark.parametrize("w", [1.0, 2.0, 0.35, 1.7, 3.0])
def test_add_impacts_is_numpys_scatter_add_bit_for_bit(w: float) -> None:
    offsets, postings, impacts = posting_lists(1, 5_000, [3_000, 1_200, 4_999, 7])
    ours = np.zeros(5_000, dtype=np.float32)
    ref = np.zeros(5_000, dtype=np.float32)
    for t in range(offsets.shape[0] - 1):
        lo, hi = int(offsets[t]), int(offsets[t + 1])
        kernels.add_impacts(ours, postings, impacts, lo, hi, w)
        ref[postings[lo:hi]] += impacts[lo:hi] if w == 1.0 else w * impacts[lo:hi]
    assert ours.view(np.uint32).tolist() == ref.view(np.uint32).tolist()


def test_a_weight_is_rounded_to_float32_as_numpy_rounds_it() -> None:
    """0.1 is not a float32: a float64 product would round differently from numpy's float32 one."""
    postings = np.arange(1_000, dtype=np.int32)
    impacts = np.linspace(0.013, 7.9, 1_000, dtype=np.float32)
    ours = np.full(1_000, 0.3, dtype=np.float32)
    ref = ours.copy()
    kernels.add_impacts(ours, postings, impacts, 0, 1_000, 0.1)
    ref[postings] += 0.1 * impacts
    assert ours.view(np.uint32).tolist() == ref.view(np.uint32).tolist()


def test_warm_up_compiles_the_loop_for_the_index_arrays(tmp_path, monkeypatch) -> None:
    """A server warms the loop while the store opens: for the index's own array types (a
    memory-mapped, read-only array is another type to numba than one read into memory)."""
    from citewise.indexer import bm25, bm25_files
    from citewise.indexer.bm25 import BM25Index

    monkeypatch.setattr(bm25, "COMPILED_MIN_DOCS", 0)  # as a big index is scored

    index = BM25Index.build([(1, "dense retrieval of papers", "", ""), (2, "sparse retrieval", "", "")])
    bm25_files.save_index(index, tmp_path / "idx")
    monkeypatch.setattr(bm25_files, "MMAP_BYTES", 0)
    mapped = bm25_files.load_index(tmp_path / "idx")
    assert mapped is not None and not mapped.postings.flags.writeable
    mapped.warm_up()
    postings_type = kernels.numba.typeof(mapped.postings)
    assert any(sig[1] == postings_type for sig in kernels._add_impacts.signatures)
    assert sorted(pid for pid, _ in mapped.search("retrieval", 5)) == [1, 2]


def test_a_small_index_never_imports_numba() -> None:
    """Below ``COMPILED_MIN_DOCS`` numpy adds the impacts: a server over a .bib or a 110k store
    neither waits for numba's import nor holds its 123 MB (checked in a fresh interpreter)."""
    code = (
        "import sys\n"
        "from citewise.indexer.bm25 import BM25Index\n"
        "idx = BM25Index.build([(1, 'dense retrieval', '', ''), (2, 'sparse retrieval', '', '')])\n"
        "idx.warm_up()\n"
        "assert sorted(p for p, _ in idx.search('retrieval', 5)) == [1, 2]\n"
        "print('numba' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
