"""First stage of the recommender: candidates from BM25, the dense model, or a fusion of both.

Each source ranks the whole store; fusion is reciprocal-rank (RRF, k=60 by default) with optional
per-source weights, and every candidate keeps each source's score and rank so the editor can say
*why* a paper was suggested. The BM25 source itself fuses three query texts (local sentence;
+ citing title; + citing title and abstract): measured on ACM-CR dev, the global context helps
recall in depth but hurts the top when simply concatenated, and the fusion keeps both.

Modes: ``bm25`` (the BM25 views and the feedback view), ``dense`` (the dense model alone) and
``hybrid`` (all of them, reciprocal-rank fused). The dense list is named ``dense`` in every
candidate's sources (``hatten`` before issue 24; that mode name is still accepted for a release).
Where the store knows how its papers are cited, the BM25 modes add one more list, ``cited-as``:
the papers whose citing texts are most like the query by meaning (``models/citing_vectors.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from citewise import deprecated
from citewise.indexer.bm25 import BM25Index
from citewise.indexer.engine import SearchEngine, exclusion_for

from .citation_prior import cites_any, reach_depth, with_citation_prior
from .citing_vectors import NEIGHBOURHOOD, CitingVectors
from .focus import REST_WEIGHT, focus_query, focused_vector, local_weights
from .query import Candidate, ContextQuery

MODES = ("bm25", "dense", "hybrid")
DENSE = "dense"  # the dense list's source name (in Candidate.sources / .ranks, and RRF weights)
CITED_AS = "cited-as"  # the list of papers by how they are cited (models/citing_vectors.py)
# A remote engine's searches wait on the network or on Milvus: its BM25 views are sent together.
# The local index's searches are numpy work under the GIL, and stay one after another.
_VIEWS = ThreadPoolExecutor(4, thread_name_prefix="citewise-views")


class DenseSource(Protocol):
    """What the dense prefetch provides: top-k (paper id, cosine) for a query. A source that also
    has ``encoder`` and ``search_vector(vec, k)`` (the local ANN index, Milvus) is searched with
    the placeholder's focused vector (:func:`~.focus.focused_vector`); one without them is asked
    for the placeholder's own clause (:func:`~.focus.focus_query`)."""

    def search_query(self, query: ContextQuery, k: int) -> list[tuple[int, float]]: ...


@dataclass
class PrefetchSettings:
    """How candidates are gathered and fused (defaults chosen on ACM-CR dev)."""

    rrf_k: float = 60.0
    bm25_views: tuple[str, ...] = ("local", "local+title", "local+title+abstract")
    weights: dict[str, float] = field(default_factory=dict)  # source name -> RRF weight (default 1)
    depth: int = 1000  # how deep each source ranks before fusion
    # Pseudo-relevance feedback: one more BM25 view, local + title expanded with the top terms of
    # the first fusion's best papers (ACM-CR dev: R@200 0.747 -> 0.763, R@1000 0.858 -> 0.879).
    prf_docs: int = 10  # 0 turns feedback off
    prf_terms: int = 20
    # The citation-count prior (models/citation_prior.py): the RRF weight of the fused candidates
    # ordered by how often the store's papers cite them; 0 = off (docs/citation-expansion.md).
    prior_weight: float = 0.5
    # Issue 16: in a sentence with several citations, the words outside the placeholder's own
    # segment count this much in every BM25 view (models/focus.py; 1 = the whole sentence alike).
    rest_weight: float = REST_WEIGHT


def rrf(
    ranked: dict[str, list[tuple[int, float]]], k: float = 60.0, weights: dict[str, float] | None = None
) -> list[Candidate]:
    """Reciprocal-rank fusion of ranked lists; ties keep the order of first appearance."""
    weights = weights or {}
    fused: dict[int, Candidate] = {}
    for name, items in ranked.items():
        w = weights.get(name, 1.0)
        for rank, (pid, score) in enumerate(items, start=1):
            cand = fused.get(pid)
            if cand is None:
                cand = fused[pid] = Candidate(pid, 0.0)
            cand.score += w / (k + rank)
            cand.sources[name] = score
            cand.ranks[name] = rank
    return sorted(fused.values(), key=lambda c: -c.score)


def view_text(query: ContextQuery, view: str) -> str:
    """The query text of a named BM25 view."""
    if view == "local":
        return query.local
    if view == "local+title":
        return query.text(with_title=True, with_abstract=False)
    if view == "local+title+abstract":
        return query.text(with_title=True, with_abstract=True)
    raise ValueError(f"unknown BM25 view {view!r}")


class Prefetcher:
    """Candidates for a context query from the available sources.

    ``excluded`` paper ids are never returned (e.g. the evaluation blacklist, or papers the draft
    already cites). Works with BM25 alone until a dense index is available.
    """

    def __init__(
        self,
        bm25: BM25Index | SearchEngine | None,
        dense: DenseSource | None = None,
        settings: PrefetchSettings | None = None,
        excluded: Iterable[int] = (),
        feedback_texts: Callable[[list[int]], list[str]] | None = None,
        citing: CitingVectors | None = None,
    ) -> None:
        self.bm25 = bm25
        self.dense = dense
        # Where the store knows how its papers are cited: the papers whose citers wrote most like
        # the query (models/citing_vectors.py), one more list beside the BM25 views.
        self.citing = citing  # it votes only where the query's BM25 neighbourhood is one it covers
        self.feedback_texts = feedback_texts
        self.settings = settings or PrefetchSettings()
        self.excluded = set(excluded)
        self._mask: np.ndarray | None = None
        if bm25 is not None and self.excluded:
            self._mask = exclusion_for(bm25, self.excluded)  # a mask, or Milvus's filter

    def available_modes(self) -> list[str]:
        modes = []
        if self.bm25 is not None:
            modes.append("bm25")
        if self.dense is not None:
            modes.append("dense")
            if self.bm25 is not None:
                modes.append("hybrid")
        return modes

    def default_mode(self) -> str:
        return (
            "hybrid"
            if self.dense is not None and self.bm25 is not None
            else ("bm25" if self.bm25 else "dense")
        )

    def source_lists(
        self, query: ContextQuery, mode: str, depth: int | None = None
    ) -> dict[str, list[tuple[int, float]]]:
        """Each source's own ranking (best first, ``depth`` deep: the settings' by default), before fusion."""
        depth = depth or self.settings.depth
        lists: dict[str, list[tuple[int, float]]] = {}
        if mode in ("bm25", "hybrid"):
            if self.bm25 is None:
                raise RuntimeError("BM25 index not available")
            seen: set[str] = set()
            views: dict[str, Any] = {}
            for view in self.settings.bm25_views:
                text = view_text(query, view)
                if text.strip() and text not in seen:  # views equal without global context
                    seen.add(text)
                    weighted = local_weights(query, text, self.bm25.tokenizer, self.settings.rest_weight)
                    views[f"bm25:{view}"] = weighted
            lists.update(self._search_views(self.bm25, views, depth))
            if self.settings.prf_docs and self.feedback_texts is not None and lists:
                top = [c.paper_id for c in rrf(lists, self.settings.rrf_k)[: self.settings.prf_docs]]
                terms = self.bm25.expansion_terms(self.feedback_texts(top), self.settings.prf_terms)
                seed = local_weights(
                    query, view_text(query, "local+title"), self.bm25.tokenizer, self.settings.rest_weight
                )
                terms.update(seed if isinstance(seed, Counter) else self.bm25.tokenizer(seed))
                lists["bm25:prf"] = self.bm25.search(terms, depth, mask=self._mask)
            # Citing vectors are opened for the local index only (Recommender._load_citing).
            if (
                self.citing is not None
                and isinstance(self.bm25, BM25Index)
                and self.citing.speaks_for(self._neighbours(lists), self.bm25.size)
            ):
                lists[CITED_AS] = self._nearest(self.citing, query, depth)
        # One list by meaning a query: where the ``cited-as`` list speaks, the dense paper list
        # stays out (fused beside it, it cost ACL dev MRR 0.429 -> 0.392: a cited ACL paper is
        # often a title alone); where it steps aside, the paper list reads what the sentence asks
        # for among papers the citation knowledge does not cover (docs/citation-expansion.md).
        if mode == "dense" or (mode == "hybrid" and CITED_AS not in lists):
            if self.dense is None:
                raise RuntimeError("dense index not available (run `citewise index --embed` with a model)")
            lists[DENSE] = self._nearest(self.dense, query, depth)
        return lists

    def _neighbours(self, lists: dict[str, list[tuple[int, float]]]) -> list[int]:
        """The query's BM25 neighbourhood: the first papers of its BM25 lists fused (what the
        ``cited-as`` list checks its coverage against, models/citing_vectors.py)."""
        return [c.paper_id for c in rrf(lists, self.settings.rrf_k)[:NEIGHBOURHOOD]]

    def _nearest(self, source: DenseSource, query: ContextQuery, depth: int) -> list[tuple[int, float]]:
        """A dense source's top ``depth`` for the query, excluded papers left out. In a sentence
        with several citations each placeholder is asked with its own clause weighed against the
        sentence (``rest_weight``, as in the BM25 views): asked with the whole sentence, every
        placeholder of it got the same dense list (models/focus.py)."""
        want = depth + len(self.excluded)
        search = getattr(source, "search_vector", None)
        encoder = getattr(source, "encoder", None)
        own = focus_query(query)
        if own is query or self.settings.rest_weight >= 1.0:
            hits = source.search_query(query, want)
        elif search is not None and encoder is not None:
            hits = search(focused_vector(encoder.encode_query, query, self.settings.rest_weight), want)
        else:
            hits = source.search_query(own, want)
        return [(pid, s) for pid, s in hits if pid not in self.excluded][:depth]

    def _search_views(
        self, engine: BM25Index | SearchEngine, views: dict[str, Any], depth: int
    ) -> dict[str, list[tuple[int, float]]]:
        """Each view's top ``depth``, in the views' order: sent in parallel to an engine that waits
        on round trips (``parallel_queries``: Milvus), one after another to the local index."""
        if len(views) > 1 and getattr(engine, "parallel_queries", False):
            sent = {
                name: _VIEWS.submit(engine.search, q, depth, mask=self._mask) for name, q in views.items()
            }
            return {name: future.result() for name, future in sent.items()}
        return {name: engine.search(q, depth, mask=self._mask) for name, q in views.items()}

    def candidates(self, query: ContextQuery, k: int = 200, mode: str | None = None) -> list[Candidate]:
        """The top-k fused candidates for the query."""
        mode = deprecated.prefetch_mode(mode or self.default_mode(), "prefetch mode")
        if mode not in MODES:
            raise ValueError(f"unknown prefetch mode {mode!r} (one of {', '.join(MODES)})")
        count_of = self._citation_counts()
        lists = self.source_lists(query, mode, depth=self._answer_depth(k, mode, count_of is not None))
        if len(lists) == 1 and count_of is None:
            ((name, items),) = lists.items()
            return [Candidate(pid, s, {name: s}, {name: r}) for r, (pid, s) in enumerate(items[:k], start=1)]
        fused = rrf(lists, self.settings.rrf_k, self.settings.weights)
        if count_of is not None:
            fused = with_citation_prior(fused, count_of, self.settings.prior_weight, self.settings.rrf_k)
        return fused[:k]

    def _answer_depth(self, k: int, mode: str, prior: bool) -> int | None:
        """How deep the sources rank for a top ``k``: the settings' depth, except for one BM25
        view without feedback (the keystroke path). Its top k is the answer, so it need not rank
        1,000 deep; with the citation prior it ranks as deep as a paper can still be lifted into
        the top k (``citation_prior.reach_depth``, which measured better than 1,000 there)."""
        single = mode == "bm25" and len(self.settings.bm25_views) == 1 and not self.settings.prf_docs
        if not single:
            return None
        if not prior:
            return k
        (view,) = self.settings.bm25_views
        weight = self.settings.weights.get(f"bm25:{view}", 1.0)
        depth = reach_depth(k, weight, self.settings.prior_weight, self.settings.rrf_k)
        return None if depth is None else min(depth, self.settings.depth)

    def _citation_counts(self) -> Callable[[list[int]], np.ndarray] | None:
        """The index's citation counts when the prior is on and the store knows any citations
        (remote engines keep none): otherwise the ranking is exactly the fusion's."""
        if self.bm25 is None or self.settings.prior_weight <= 0 or not cites_any(self.bm25):
            return None
        return self.bm25.citing_count
