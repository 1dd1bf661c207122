"""Exact top-k of a BM25 query without scoring every document (MaxScore, issue 28).

Why: the dense path (:meth:`citewise.indexer.bm25.BM25Index._search_exhaustive`) scores every
document and is linear in the store: 275 ms for the keystroke path's one view at ten million
papers. Rare query terms bound which documents can reach the top k; the common terms (most of the
postings) are then looked up only for those candidates. The answer is the dense path's, bit for
bit (ties fall by position). Figures: ``bench/bench_bm25_topk.py``; tests:
``tests/indexer/test_bm25_pruned.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Protocol

import numpy as np


class PostingIndex(Protocol):
    """What the pruned search reads of a BM25 index (:class:`citewise.indexer.bm25.BM25Index`, which
    imports this module: named by this protocol, not imported, so there is no import cycle)."""

    postings: np.ndarray
    impacts: np.ndarray
    doc_ids: np.ndarray
    base_ids: np.ndarray
    _alive: np.ndarray | None


# Exact top-k by dynamic pruning (issue 28, ``MaxScore``); the figures are measured with
# bench/bench_bm25_topk.py. Below this many documents the dense score vector costs no more (at
# ACM-CR's 110k, 2 ms: pruned a little faster at k = 20, slower at k = 1000) ...
PRUNE_MIN_DOCS = 100_000
# ... nor where k times the query's terms (what θ's and the final scores' lookups grow with) passes
# N over this: at a million papers the dense path wins at k = 1000 for an 18-term sentence, at two
# million it loses, save for the 60-80 terms of the view with the citing abstract.
PRUNE_DOCS_PER_LOOKUP = 64
# The pruned path declines (the dense one answers) when the terms it would score in full hold more
# than this share of the query's postings plus N (the dense path's work, a posting or a document
# a unit): a query of common words only, or a mask that hides the best documents (θ stays low).
PRUNE_MAX_SHARE = 0.6
# The first θ comes from the terms of highest bound holding this share of N in postings ...
PRUNE_PROBE = 0.02
# ... and from this many times k of their best documents (and a few more), scored in full: more
# documents, a higher θ but more lookups (at two million papers: k = 20 fastest with ~100, k = 1000
# with ~2,000).
PRUNE_PICKS = 2
PRUNE_PICKS_EXTRA = 64
# Relative margin on every bound and threshold comparison: a float32 sum of n query terms' impacts
# in another order than the dense path's differs from its sum by under n * 2**-24 relatively, and
# a comparison meets at most four such errors (a partial score, θ, their true values), so this
# covers ...
SLACK = 1e-3
# ... queries of up to this many terms (a longer one takes the dense path).
MAX_TERMS = 1000


@dataclass
class QueryTerm:
    """One query term for the pruned search: its posting slice, weight and a bound on its weighted
    impacts (``BM25Index._query_terms``)."""

    lo: int
    hi: int
    w: float
    bound: float


def _kth(values: np.ndarray, extra: np.ndarray, k: int) -> float:
    """The k-th largest of ``values`` and ``extra`` together, 0.0 when they hold fewer than k: a
    lower bound of the k-th best final score when each is a lower bound of a distinct document's."""
    m = values.shape[0] + extra.shape[0]
    if m < k:
        return 0.0
    both = np.concatenate([values, extra]) if extra.shape[0] else values
    return float(np.partition(both, m - k)[m - k])


def _some_best(values: np.ndarray, count: int) -> np.ndarray:
    """Sorted indices of about ``count`` of the largest ``values`` (at most ``count``; at least one).

    θ needs good documents, not exactly the best ones, and an argpartition of the half million
    candidates a common query has at two million papers costs 5 ms: the ``count``-th largest is
    estimated from a strided sample (a fiftieth of that cost), the values above it kept."""
    n = values.shape[0]
    step = max(1, n // (16 * count))
    sample = values[::step]
    rank = min(sample.shape[0] - 1, max(0, sample.shape[0] * count // n))
    floor = np.partition(sample, sample.shape[0] - 1 - rank)[sample.shape[0] - 1 - rank]
    top = np.flatnonzero(values >= floor)
    if top.shape[0] > count:
        top = np.sort(top[np.argpartition(-values[top], count - 1)[:count]])
    return top


class MaxScore:
    """One pruned top-k search over a base index (MaxScore, term at a time, issue 28).

    The terms whose impacts can be largest (rare words: short posting lists) are scored in full
    until the bounds of all the other terms sum below θ, a lower bound of the k-th best score: a
    document none of the scored terms matches can then not reach the top k, and the common terms
    (long lists: most of a dense pass's work) are only looked up for the candidates, each
    candidate dropped as soon as its partial score plus the bounds still to come falls below θ.
    The few left are scored again term by term in query order, the dense path's very float32
    additions, so the answer is the exhaustive one bit for bit (ties fall by position).

    ``acc`` is the index's scratch vector: zero everywhere on entry and again on return."""

    def __init__(
        self, index: PostingIndex, acc: np.ndarray, k: int, mask: np.ndarray | None, extra: np.ndarray
    ) -> None:
        self.index = index
        self.acc = acc
        self.k = k
        self.mask = mask
        self.extra = extra  # the delta's scores: they count toward θ
        self.n = index.base_ids.shape[0]

    def run(self, qterms: list[QueryTerm], extra_pos: np.ndarray) -> list[tuple[int, float]] | None:
        """The top k of the base documents and the delta's (``extra_pos``), or None when the full
        scoring would cover so much of the dense path's work that it had better answer."""
        if not qterms:
            nothing = np.zeros(0, dtype=self.index.postings.dtype)
            return self._exact_top(nothing, nothing.astype(np.float32), [], extra_pos)
        # Fewest postings a unit of bound first: the terms left unscored (the last ones) must
        # have bounds summing below θ, and should hold as many postings as can be (qtf weights
        # make this differ from the plain order of bounds).
        order = sorted(qterms, key=lambda t: ((t.hi - t.lo) / t.bound, -t.bound))
        found = self._essential(order)
        if found is None:
            return None
        cand, part, used, theta = found
        cand, part = self._refine(cand, part, order[used:], theta)
        return self._exact_top(cand, part, qterms, extra_pos)

    def _essential(self, order: list[QueryTerm]) -> tuple[np.ndarray, np.ndarray, int, float] | None:
        """Score the first terms of ``order`` in full: first a cheap probe (``PRUNE_PROBE`` of the
        documents' worth of postings), whose best documents give θ (:meth:`_theta`), then every
        term until the bounds of the rest sum below θ. Returns (candidates, sorted; their partial
        scores; terms scored; θ), or None when that is more than ``PRUNE_MAX_SHARE`` of the dense
        path's work (every posting of the query, and a pass over the documents)."""
        sizes = np.cumsum([t.hi - t.lo for t in order])
        bounds = [t.bound for t in order]
        rest = np.append(np.cumsum(bounds[::-1])[::-1], 0.0)  # rest[i]: the bounds of order[i:]
        probe = max(1, int(np.searchsorted(sizes, PRUNE_PROBE * self.n, side="right")))
        seen = np.sort(np.concatenate([self._accumulate(t, fresh=True) for t in order[:probe]]))
        theta = self._theta(*self._kept(seen, self.acc[seen]), order[probe:])
        used = max(probe, int(np.argmax(rest < theta * (1.0 - SLACK))) if theta > 0 else len(order))
        if used > probe and sizes[used - 1] > PRUNE_MAX_SHARE * (sizes[-1] + self.n):
            self.acc[seen] = 0.0
            return None
        for term in order[probe:used]:
            self._accumulate(term, fresh=False)
        if used > probe:
            # The candidates in one scan, in order: the documents whose partial score plus the
            # bounds of the terms left can reach θ (the others would go before the first lookup).
            # The mask and the live documents are applied in the same vectorised pass (gathering
            # them at a few million candidates cost 8 ms a query at ten million papers).
            floor = (theta * (1.0 - SLACK) - rest[used]) / (1.0 + SLACK)
            keep = self.acc >= floor if floor > 0 else self.acc != 0.0
            for allowed in (self.index._alive, self.mask):
                if allowed is not None:
                    keep &= allowed[: self.n]
            cand = np.flatnonzero(keep).astype(self.index.postings.dtype)
            part = self.acc[cand]
            self.acc.fill(0.0)
        else:
            part = self.acc[seen]
            self.acc[seen] = 0.0
            cand, part = self._kept(seen, part)
        return cand, part, used, max(theta, self._theta(cand, part, order[used:]))

    def _accumulate(self, term: QueryTerm, fresh: bool) -> np.ndarray:
        """Add ``term``'s weighted impacts to the scratch vector; with ``fresh``, return the
        positions it made nonzero (new candidates), else nothing (found later in one scan)."""
        index, kernels = self.index, _kernels()
        if not fresh:
            kernels.add_impacts(self.acc, index.postings, index.impacts, term.lo, term.hi, term.w)
            return index.postings[:0]
        return kernels.add_impacts_new(self.acc, index.postings, index.impacts, term.lo, term.hi, term.w)

    def _theta(self, cand: np.ndarray, part: np.ndarray, later: list[QueryTerm]) -> float:
        """θ from complete scores: about ``PRUNE_PICKS * k`` candidates of best partial score, their
        ``later`` terms looked up, and the k-th best of those sums (and of the delta's scores).

        Each sum is a document's final score (up to rounding, which ``SLACK`` covers), so θ is a
        lower bound of the k-th best; far above the k-th best *partial* score, it ends the full
        scoring after fewer terms and drops more candidates before the lookups."""
        if cand.shape[0] + self.extra.shape[0] < self.k:
            return 0.0
        picks = int(PRUNE_PICKS * self.k) + PRUNE_PICKS_EXTRA
        if cand.shape[0] > picks:
            top = _some_best(part, picks)
            cand, part = cand[top], part[top]
        full = part.copy()
        for term in later:
            full += self._lookup(term, cand)
        return _kth(full, self.extra, self.k)

    def _kept(self, cand: np.ndarray, part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The candidates the dense path could return: alive (not changed or removed since the
        base was built) and kept by the mask."""
        alive = self.index._alive
        if alive is None and self.mask is None:
            return cand, part
        ok = np.ones(cand.shape[0], dtype=bool)
        if alive is not None:
            ok &= alive[cand]
        if self.mask is not None:
            ok &= self.mask[cand]
        return cand[ok], part[ok]

    def _refine(
        self, cand: np.ndarray, part: np.ndarray, rest: list[QueryTerm], theta: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Add the other terms' impacts, looked up for the candidates only; before each term, drop
        the candidates whose partial score plus the bounds still to come stays below θ (they
        cannot reach the top k), and raise θ as the partial scores grow."""
        left = np.append(np.cumsum([t.bound for t in rest][::-1])[::-1], 0.0)
        for i, term in enumerate(rest):
            live = part * (1.0 + SLACK) + left[i] >= theta * (1.0 - SLACK)
            if not live.all():
                cand, part = cand[live], part[live]
            part += self._lookup(term, cand)
            theta = max(theta, _kth(part, self.extra, self.k))
        return cand, part

    def _exact_top(
        self, cand: np.ndarray, part: np.ndarray, qterms: list[QueryTerm], extra_pos: np.ndarray
    ) -> list[tuple[int, float]]:
        """The top k of the candidates near θ, their scores recomputed term by term in query order:
        the very float32 additions of the dense path, so scores come out bit for bit the same and
        ties fall by position as in :func:`top_k`."""
        theta = _kth(part, self.extra, self.k)
        cand = cand[part * (1.0 + SLACK) >= theta * (1.0 - SLACK)]
        exact = np.zeros(cand.shape[0], dtype=np.float32)
        for term in qterms:
            exact += self._lookup(term, cand)
        pos = np.concatenate([cand.astype(np.int64), extra_pos])
        scores = np.concatenate([exact, self.extra])
        best = np.lexsort((pos, -scores))[: self.k]
        ids = self.index.doc_ids
        return [(int(ids[pos[i]]), float(scores[i])) for i in best if scores[i] > 0]

    def _lookup(self, term: QueryTerm, cand: np.ndarray) -> np.ndarray:
        """``w * impact`` of ``term`` for each candidate (sorted positions), 0 where absent: one
        forward walk over the sorted posting list, galloping to each candidate (a few pages of a
        memory-mapped index for few candidates, one sequential read for many)."""
        index = self.index
        return _kernels().lookup(index.postings, index.impacts, term.lo, term.hi, term.w, cand)


def _kernels() -> ModuleType:
    """The compiled loops (:mod:`citewise.indexer.bm25_kernels`), imported on the first search:
    numba takes ~0.3 s to import, which CLI commands that never search should not pay."""
    from . import bm25_kernels

    return bm25_kernels
