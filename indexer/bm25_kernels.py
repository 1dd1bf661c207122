"""The loops of BM25 scoring over posting lists, compiled (numba).

Why compiled: numpy adds a term's impacts to the score vector (``acc[post] += imp``) in three
passes over random positions (gather, add, scatter), and an ``acc >= floor`` scan builds a mask
of the whole vector before ``flatnonzero`` reads it. At ten million papers a 19-term sentence
holds 15 million postings: numpy takes 128 ms to add them all, one compiled loop 39 ms
(``bench/bench_bm25_topk.py``; issue 28's first answer). A candidate lookup walks the sorted
posting list forward from the previous candidate (galloping), reading the pages it needs once,
where numpy binary-searched every candidate from the list's start or spread the whole list over
the score vector.

The scan for candidates over the whole score vector stays numpy's (a vectorised compare and
``flatnonzero``: 12 ms at ten million documents, where a compiled loop with a branch a document
took 50).

The arithmetic is numpy's: float32 products and float32 sums, each document's additions in the
caller's term order, and no fused multiply-add (numba contracts only under ``fastmath``), so the
scores are bit for bit those of the numpy expressions they replace
(``tests/indexer/test_bm25_kernels.py``). ``nogil``: a search in one thread leaves the
interpreter to the editor's requests in the others.

numba costs ~0.3 s to import: :mod:`citewise.indexer.bm25` imports this module on its first
search, so CLI commands that never search do not pay it. ``cache``: compiled once per machine,
kept beside the module (or in numba's user cache where that is read-only).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def _add_impacts(
    acc: np.ndarray, postings: np.ndarray, impacts: np.ndarray, lo: int, hi: int, w: float
) -> None:
    """``acc[postings[lo:hi]] += w * impacts[lo:hi]`` (``w`` a float32; 1.0 leaves impacts exact)."""
    for j in range(lo, hi):
        acc[postings[j]] += w * impacts[j]


@numba.njit(nogil=True, cache=True)
def _add_impacts_new(
    acc: np.ndarray, postings: np.ndarray, impacts: np.ndarray, lo: int, hi: int, w: float
) -> np.ndarray:
    """:func:`add_impacts`, returning the positions it made nonzero (zero before), in list order."""
    out = np.empty(hi - lo, dtype=postings.dtype)
    m = 0
    for j in range(lo, hi):
        p = postings[j]
        before = acc[p]
        after = before + w * impacts[j]
        acc[p] = after
        if before == 0.0 and after != 0.0:
            out[m] = p
            m += 1
    return out[:m]


@numba.njit(nogil=True, cache=True)
def _lookup(
    postings: np.ndarray, impacts: np.ndarray, lo: int, hi: int, w: float, cand: np.ndarray
) -> np.ndarray:
    """``w * impact`` of each candidate (ascending positions) in the sorted posting list
    ``postings[lo:hi]``, 0.0 where absent: a forward walk that gallops to each candidate."""
    out = np.zeros(cand.shape[0], dtype=impacts.dtype)
    j = lo
    for i in range(cand.shape[0]):
        c = cand[i]
        if j >= hi:
            break
        if postings[j] < c:
            prev, step = j, 1  # postings[prev] < c: the answer lies past prev
            nxt = j + 1
            while nxt < hi and postings[nxt] < c:
                prev = nxt
                step <<= 1
                nxt = prev + step
            a, b = prev + 1, min(nxt, hi)
            while a < b:  # the first position in (prev, b] whose posting is >= c
                mid = (a + b) >> 1
                if postings[mid] < c:
                    a = mid + 1
                else:
                    b = mid
            j = a
        if j < hi and postings[j] == c:
            out[i] = w * impacts[j]
    return out


# The public entry points cast the weight to float32, as numpy casts a Python float multiplying a
# float32 array: a float64 weight would make the products (and the sums) float64 before rounding.
def add_impacts(
    acc: np.ndarray, postings: np.ndarray, impacts: np.ndarray, lo: int, hi: int, w: float
) -> None:
    """``acc[postings[lo:hi]] += w * impacts[lo:hi]``, as numpy computes it."""
    _add_impacts(acc, postings, impacts, lo, hi, np.float32(w))


def add_impacts_new(
    acc: np.ndarray, postings: np.ndarray, impacts: np.ndarray, lo: int, hi: int, w: float
) -> np.ndarray:
    """:func:`add_impacts`, returning the positions it made nonzero (zero before), ascending."""
    return _add_impacts_new(acc, postings, impacts, lo, hi, np.float32(w))


def lookup(
    postings: np.ndarray, impacts: np.ndarray, lo: int, hi: int, w: float, cand: np.ndarray
) -> np.ndarray:
    """``w * impact`` of each candidate (ascending positions) in ``postings[lo:hi]``, 0.0 where absent."""
    return _lookup(postings, impacts, lo, hi, np.float32(w), cand)
