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
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import CancelledError, Executor, Future
from dataclasses import dataclass, field

from citewise.indexer.records import normalize_title
from citewise.indexer.store import StoredPaper
from citewise.models.library import Library
from citewise.models.query import Candidate, ContextQuery
from citewise.models.recommender import Recommendation, Recommender

from .bibindex import BibEntryIds, BibIndex

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


# --------------------------------------------------------------------------------------------
# Typed-prefix filtering (the server filters, so the client never hides a context-ranked paper)
# --------------------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return normalize_title(text).split()


def matches_prefix(paper: StoredPaper, key: str, prefix: str) -> bool:
    """Whether what the user typed in the key slot selects this paper.

    A prefix of the key, of any title word, or of any author's last name (case and accents
    ignored). Matching word starts rather than fuzzy subsequences keeps the server's choice
    compatible with every client's own filter on the ``filterText`` we send.
    """
    p = prefix.strip().lower()
    if not p:
        return True
    if key.lower().startswith(p):
        return True
    np_ = normalize_title(p)
    if not np_:
        return False
    first = np_.split()[0]
    words = _words(paper.title)
    for author in paper.authors:
        words.extend(_words(author.split(",")[0]))
    return any(w.startswith(first) for w in words)


def filter_by_prefix(
    items: list[Recommendation], prefix: str, key_of: Callable[[StoredPaper], str]
) -> list[Recommendation]:
    """Items whose key, title word or author matches the typed prefix, keeping the ranking."""
    if not prefix.strip():
        return items
    return [r for r in items if matches_prefix(r.paper, key_of(r.paper), prefix)]


# --------------------------------------------------------------------------------------------
# What a key slot offers: the ranking, and the draft's own .bib (texlab lists every key there)
# --------------------------------------------------------------------------------------------

PaperLookup = Callable[[str, BibEntryIds], "StoredPaper | None"]
"""``lookup(key, ids)``: the stored paper of a ``.bib`` entry, or None (not imported, no store)."""


def has_sentence(query: ContextQuery) -> bool:
    """Whether a key slot has words of its own around it, beyond the draft's title and abstract.

    A fresh draft's ``\\cite{`` right after ``\\maketitle`` (or the abstract) reads the title (or the
    abstract's last sentence) as its local context; those words are in the query anyway, and they
    say nothing about this slot that they do not say about every other: such a slot is ranked
    as one with no sentence (the draft's ``.bib`` first, :func:`slot_items`)."""
    words = set(_words(query.local))
    if not words:
        return False
    return bool(words - set(_words(query.citing_title)) - set(_words(query.citing_abstract)))


def bib_entry_matches(key: str, ids: BibEntryIds, typed: str) -> bool:
    """Whether a ``.bib`` entry fits what the key slot holds: a prefix of its key or of a title
    word, the words :func:`matches_prefix` reads, from the ``.bib``'s own text (no store look-up,
    so a 50,000-entry library is filtered without 50,000 queries)."""
    p = typed.strip().lower()
    if not p or key.lower().startswith(p):
        return True
    np_ = normalize_title(p)
    if not np_ or not ids.norm_title:
        return False
    first = np_.split()[0]
    return any(w.startswith(first) for w in ids.norm_title.split())


def own_entries(
    bib: BibIndex, typed: str, first: Iterable[str], lookup: PaperLookup
) -> Iterator[tuple[Recommendation, str]]:
    """The draft's ``.bib`` entries that fit ``typed``: the keys of ``first`` (in that order) that
    the ``.bib`` holds, then the others in the file's order. Lazy: a slot shows a few of them.

    An entry the store lacks (not imported yet, no store, a title-less ``@misc{foo,}``) is offered
    as the ``.bib`` has it: its key, and its title when it has one. Each comes with its key in
    the ``.bib`` (a stored paper may carry another source's key)."""
    seen: set[str] = set()
    for key in itertools.chain(first, bib.entries):
        ids = bib.entries.get(key)
        if ids is None or key in seen:
            continue
        seen.add(key)
        if not bib_entry_matches(key, ids, typed):
            continue
        paper = lookup(key, ids) or StoredPaper(title=ids.title or key, key=key, id=0)
        rec = Recommendation(paper, Candidate(paper.id, 0.0, {"your .bib": 1.0}, {"your .bib": len(seen)}))
        yield rec, key


def slot_items(
    ranked: list[Recommendation],
    own: Iterable[tuple[Recommendation, str]],
    typed: str,
    key_of: Callable[[StoredPaper], str],
    k: int,
    *,
    own_first: bool,
    bib_fallback: bool = True,
) -> tuple[list[Recommendation], bool]:
    """The ``k`` papers a key slot offers, and whether the client must ask again as the user types.

    ``ranked`` is the recommender's list for the slot's context, filtered here by ``typed`` (the
    whole key under the cursor); ``own`` the draft's ``.bib`` entries (:func:`own_entries`).

    * No sentence around the slot (``\\cite{`` on a line of its own, a fresh draft): there is
      nothing to rank by but the title and the keys cited so far, so the ``.bib`` leads, as in
      texlab, and the ranking follows.
    * A sentence: the ranking leads. The ``.bib`` follows where something was typed (entries whose
      key or title it starts) or where the ranking found nothing (an empty store); not otherwise:
      the draft's own entries the store lacks are already in the ranking where their words place
      them (:mod:`.bib_overlay`), the completion lifts a ``.bib`` paper only between the sentence's
      first two (:mod:`citewise.models.bib_lift`), and entries the sentence did not find must not
      pass papers it did.

    Each paper once. The list is incomplete when more papers fit than were sent and the server
    filters them: something was typed, or the ``.bib`` leads (entries past ``k`` are reached only
    by typing). ``bib_fallback`` False (the store is still opening): an empty ranking stays empty,
    not the ``.bib`` in file order; the client asks again.
    """
    ranked_part = filter_by_prefix(ranked, typed, key_of) if typed else ranked
    keyed = [(r, key_of(r.paper)) for r in ranked_part]
    if own_first:
        parts: list[tuple[bool, Iterable[tuple[Recommendation, str]]]] = [(True, own), (False, keyed)]
    else:
        parts = [(False, keyed), (True, own)] if typed or (not keyed and bib_fallback) else [(False, keyed)]
    out: list[Recommendation] = []
    keys: set[str] = set()  # every key offered
    own_keys: set[str] = set()  # the .bib's keys offered
    ids: set[int] = set()  # the stored papers offered
    for is_own, part in parts:
        for rec, key in part:
            pid = rec.paper.id
            # A stored paper once; a .bib entry once, whichever list found it. Two stored papers
            # may share a key (two versions of one work): both stay, completion tells them apart.
            if (pid and pid in ids) or key in own_keys or (is_own and key in keys):
                continue
            keys.add(key)
            ids.add(pid)
            if is_own:
                own_keys.add(key)
            out.append(rec)
            if len(out) > k:
                return out[:k], bool(typed) or own_first
    return out, False


# --------------------------------------------------------------------------------------------
# Whole-draft suggestions (citewise.suggestForDraft and `citewise suggest`)
# --------------------------------------------------------------------------------------------
