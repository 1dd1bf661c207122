"""The compiled BM25 loops compute what the numpy expressions they replaced computed, bit for bit
(``indexer/bm25_kernels.py``): the pruned search's exactness and the dense path's scores rest on it."""

from __future__ import annotations

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


def test_add_impacts_new_returns_the_positions_it_made_nonzero() -> None:
    offsets, postings, impacts = posting_lists(2, 800, [300, 500])
    acc = np.zeros(800, dtype=np.float32)
    first = kernels.add_impacts_new(acc, postings, impacts, 0, int(offsets[1]), 1.0)
    assert first.tolist() == postings[: offsets[1]].tolist()
    assert first.dtype == postings.dtype
    second = kernels.add_impacts_new(acc, postings, impacts, int(offsets[1]), int(offsets[2]), 2.0)
    expected = sorted(set(postings[offsets[1] :].tolist()) - set(first.tolist()))
    assert second.tolist() == expected


@pytest.mark.parametrize("n_cand", [0, 1, 5, 40, 700, 2_000])
@pytest.mark.parametrize("w", [1.0, 1.5])
def test_lookup_finds_each_candidate_as_a_binary_search_does(n_cand: int, w: float) -> None:
    offsets, postings, impacts = posting_lists(3, 2_000, [100, 1_000, 1_999])
    rng = np.random.default_rng(n_cand)
    cand = np.sort(rng.choice(2_000, size=n_cand, replace=False)).astype(np.int32)
    for t in range(3):
        lo, hi = int(offsets[t]), int(offsets[t + 1])
        post, imp = postings[lo:hi], impacts[lo:hi]
        at = np.minimum(np.searchsorted(post, cand), post.shape[0] - 1)
        hit = post[at] == cand
        ref = np.zeros(n_cand, dtype=np.float32)
        ref[hit] = imp[at[hit]] if w == 1.0 else w * imp[at[hit]]
        got = kernels.lookup(postings, impacts, lo, hi, w, cand)
        assert got.dtype == np.float32
        assert got.view(np.uint32).tolist() == ref.view(np.uint32).tolist()


def test_lookup_at_the_ends_of_a_list() -> None:
    """Candidates before the first posting, on the last one, past the end; an empty list."""
    postings = np.array([5, 9, 10, 400], dtype=np.int32)
    impacts = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    cand = np.array([0, 4, 5, 10, 11, 399, 400, 401, 9_000], dtype=np.int32)
    assert kernels.lookup(postings, impacts, 0, 4, 1.0, cand).tolist() == [0, 0, 1, 3, 0, 0, 4, 0, 0]
    assert kernels.lookup(postings, impacts, 2, 2, 1.0, cand).tolist() == [0] * 9
    assert kernels.lookup(postings, impacts, 1, 3, 1.0, cand).tolist() == [0, 0, 0, 3, 0, 0, 0, 0, 0]
