"""The speculative ranking cache: the full (second-stage) ranking, computed before it is asked for.

Why: the full ranking (fusion of every prefetch source now, a cross-encoder later) costs from tens
of milliseconds to about a second on 2 cores, while a completion must answer at keystroke speed.
So when a placeholder appears or its context changes, the server asks this module to rank it in
a background worker and keeps the result under a hash of the query. A completion then answers at
once with the cached full list when it is ready, or with the fast prefetch list (marked
incomplete, so the client asks again) when it is not.

No LSP types here: the language server, ``citewise suggest`` and the bench drive the same object.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import CancelledError, Executor, Future
from dataclasses import dataclass, field

from citewise.models.library import Library
from citewise.models.query import ContextQuery
from citewise.models.recommender import Recommendation, Recommender

log = logging.getLogger(__name__)


def query_hash(query: ContextQuery, k: int, candidates: int, rerank: bool, generation: int = 0) -> str:
    """A stable key for a ranking request: same context and settings -> same ranked list."""
    blob = "\x1f".join(
        (
            query.local,
            query.citing_title,
            query.citing_abstract,
            str(query.at),
            ",".join(map(str, query.others)),
            str(k),
            str(candidates),
            str(rerank),
            str(generation),
        )
    )
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()


@dataclass
class RankedList:
    """A ranked list for one query; ``complete`` is True when it is the full (second-stage) ranking."""

    key: str
    items: list[Recommendation]
    complete: bool
    seconds: float = 0.0
    finished_at: float = field(default_factory=time.monotonic)


class SpeculativeRanker:
    """Fast lists on demand, full lists in the background, cached by query hash.

    Thread-safe. ``executor`` runs the full rankings; the recommender can be swapped at any time
    (:meth:`swap`), e.g. after a reindex: the old one serves until the new one is in place, and the
    cache is dropped with it since its rankings came from the old index.
    """

    def __init__(
        self,
        recommender: Recommender,
        executor: Executor,
        *,
        k: int = 20,
        candidates: int = 200,
        rerank: bool = True,
        cache_size: int = 256,
    ) -> None:
        self._rec = recommender
        self.executor = executor
        self.k = k
        self.candidates = candidates
        self.rerank = rerank
        self.cache_size = cache_size
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, RankedList] = OrderedDict()
        self._pending: dict[str, Future[RankedList]] = {}
        self._generation = 0  # bumped by swap(): results of an older recommender are not cached

    # -- configuration ------------------------------------------------------------------------
    @property
    def recommender(self) -> Recommender:
        return self._rec

    @property
    def library(self) -> Library:
        """Paper look-ups of the recommender being served (swapped with it)."""
        return self._rec.library

    def swap(self, recommender: Recommender) -> None:
        """Serve from ``recommender`` from now on (atomic for readers); forget cached rankings."""
        with self._lock:
            self._rec = recommender
            self._generation += 1
            self._cache.clear()
            for fut in self._pending.values():
                fut.cancel()
            self._pending.clear()

    def configure(self, *, k: int, candidates: int, rerank: bool) -> None:
        with self._lock:
            self.k, self.candidates, self.rerank = k, candidates, rerank

    def key(self, query: ContextQuery) -> str:
        return query_hash(query, self.k, self.candidates, self.rerank, self._generation)

    # -- ranking ------------------------------------------------------------------------------
    def fast(self, query: ContextQuery, depth: int | None = None) -> RankedList:
        """The keystroke-path list: the single fast BM25 view, a few milliseconds."""
        t0 = time.perf_counter()
        rec = self._rec
        cands = (
            rec.prefetch(query, depth or self.k, fast=True)
            if query.local.strip() or query.citing_title
            else []
        )
        items = rec.with_papers(cands)
        return RankedList(self.key(query), items, False, time.perf_counter() - t0)

    def full(self, query: ContextQuery, depth: int | None = None) -> RankedList:
        """The full ranking (all prefetch sources fused, then the second stage when there is one)."""
        t0 = time.perf_counter()
        rec = self._rec
        k = max(depth or self.k, self.k)
        items = (
            rec.recommend(query, k, candidates=max(self.candidates, k), rerank=self.rerank)
            if query.local.strip() or query.citing_title
            else []
        )
        return RankedList(self.key(query), items, True, time.perf_counter() - t0)

    def cached(self, query: ContextQuery) -> RankedList | None:
        """The full list for ``query`` when it is ready, else None (never blocks)."""
        key = self.key(query)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
            return hit

    def schedule(self, query: ContextQuery) -> Future[RankedList]:
        """Rank ``query`` fully in the background unless it is cached or already under way."""
        key = self.key(query)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                done: Future[RankedList] = Future()
                done.set_result(hit)
                return done
            fut = self._pending.get(key)
            if fut is not None:
                return fut
            generation = self._generation
            fut = self.executor.submit(self._run, query, key, generation)
            self._pending[key] = fut
            return fut

    def _run(self, query: ContextQuery, key: str, generation: int) -> RankedList:
        try:
            result = self.full(query)
            result.key = key
        finally:
            with self._lock:
                if self._pending.get(key) is not None:
                    self._pending.pop(key, None)
        with self._lock:
            if generation == self._generation:
                self._cache[key] = result
                self._cache.move_to_end(key)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return result

    def retain(self, keep: Iterable[str]) -> int:
        """Cancel background rankings not in ``keep`` that have not started (stale contexts).

        Returns how many were cancelled. Running ones finish (a thread cannot be interrupted)
        and are cached, which is harmless.
        """
        keep = set(keep)
        cancelled = 0
        with self._lock:
            for key, fut in list(self._pending.items()):
                if key not in keep and fut.cancel():
                    self._pending.pop(key, None)
                    cancelled += 1
        return cancelled

    def pending(self) -> int:
        """Rankings queued or running (the server's status reports it)."""
        with self._lock:
            return len(self._pending)

    def cached_count(self) -> int:
        """Full rankings kept for contexts the user may come back to."""
        with self._lock:
            return len(self._cache)

    def wait(self, futures: Iterable[Future[RankedList]], timeout: float) -> list[RankedList | None]:
        """Results of ``futures`` that finish within ``timeout`` seconds (None for the others)."""
        deadline = time.monotonic() + timeout
        out: list[RankedList | None] = []
        for fut in futures:
            try:
                out.append(fut.result(timeout=max(0.0, deadline - time.monotonic())))
            except (CancelledError, TimeoutError):
                out.append(None)
            except Exception as exc:  # a failed ranking must not break diagnostics
                log.warning("background ranking failed: %s", exc)
                out.append(None)
        return out
