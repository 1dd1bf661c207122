"""The loop of BM25 scoring over posting lists, compiled (numba).

Why compiled: numpy adds a term's impacts to the score vector (``acc[post] += imp``) in three
passes over random positions (gather, add, scatter). At ten million papers a 19-term sentence
holds 15 million postings: numpy took 128 ms to add them all, one compiled loop 39-44 ms
(``bench/bench_bm25_topk.py``; issue 28's first answer).

The arithmetic is numpy's: float32 products and float32 sums, each document's additions in the
caller's term order, and no fused multiply-add (numba contracts only under ``fastmath``), so the
scores are bit for bit those of the numpy expression it replaces
(``tests/indexer/test_bm25_kernels.py``). ``nogil``: a search in one thread leaves the
interpreter to the editor's requests in the others.

numba costs ~0.3 s to import and 123 MB of resident memory (46 MB its own, the rest LLVM's
library pages): :mod:`citewise.indexer.bm25` imports this module on the first search of an index
of ``COMPILED_MIN_DOCS`` or more (numpy adds the impacts below it, where its pass costs a few
milliseconds), so small stores and CLI commands that never search do not pay it. Compiled once per machine, kept beside
the module (or in numba's user cache where that is read-only; in memory where neither is writable).
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np


def _compiled(fn: Callable) -> Callable:
    """``numba.njit``, cached on disk where numba finds a writable place (beside this module, or
    the user's cache folder), else compiled in memory by each process (~0.5 s): a read-only
    install run by a user without a home (``tests/cli/test_cli_errors.py``) must still search."""
    try:
        return numba.njit(nogil=True, cache=True)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(nogil=True)(fn)


@_compiled
def _add_impacts(
    acc: np.ndarray, postings: np.ndarray, impacts: np.ndarray, lo: int, hi: int, w: float
) -> None:
    for j in range(lo, hi):
        acc[postings[j]] += w * impacts[j]


def add_impacts(
    acc: np.ndarray, postings: np.ndarray, impacts: np.ndarray, lo: int, hi: int, w: float
) -> None:
    """``acc[postings[lo:hi]] += w * impacts[lo:hi]``, as numpy computes it: the weight is cast to
    float32 first, as numpy casts a Python float multiplying a float32 array (a float64 weight
    would make the products and the sums float64 before rounding)."""
    _add_impacts(acc, postings, impacts, lo, hi, np.float32(w))
