"""A workspace's own ``.bib`` entries, ranked by the sentence beside the shared store (no LSP types).

Why an overlay and not an import: a draft's ``.bib`` holds what its author typed, made-up and
wrong entries included. Imported into the one shared store (what earlier versions did), those
entries served every other project too: they "confirmed" themselves in another draft's
``citewise check``, came back from ``citewise search``, and merged into stored papers' records.
So a workspace's entries stay beside the store, in memory, for the drafts that name them:

* The entries the store already holds are ranked as stored papers (nothing to add).
* The others (a paper the user never imported, a made-up one) are parsed as ``citewise index``
  would and put in a small BM25 index scored **with the store's statistics** (its N, mean length
  and document frequencies: :meth:`BM25Index.build` with ``base``), so an entry's score and a
  stored paper's are on one scale. Each entry then joins the store's list where the store's own
  word ranking of the same text would put it (:func:`merge_entries`): an entry the sentence does
  not find is not offered ahead of papers it does.
* With no store, an empty one, or one still opening, every entry is in the overlay, ranked by
  the sentence alone: the first answer is ranked, never the file's order.

The overlay is rebuilt when a ``.bib`` text or the served store changes (:class:`OverlayCache`).
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, fields

from citewise.indexer.bibtex import iter_bibtex_text
from citewise.indexer.bm25 import BM25Index
from citewise.indexer.records import PaperRecord, normalize_title
from citewise.indexer.store import StoredPaper
from citewise.models.prefetch import view_text
from citewise.models.query import Candidate, ContextQuery
from citewise.models.recommender import FAST_VIEW, Recommendation, Recommender

from .bibindex import BibIndex

log = logging.getLogger(__name__)

SOURCE = "your .bib"  # the candidate's source name: "why" in the completion's documentation
# A bibliography of up to this many characters is read and indexed on the request that first needs
# it (300 ACM entries with abstracts, 420 kB, took 0.6 s at load 9 on 2 cores, BibTeX parsing most
# of it: 150 entries stay well inside a keystroke's budget); a larger one in the background, an
# earlier overlay or, with no store, the entries' titles (0.18 s for 1,693) serving meanwhile.
# Measured in characters, not entries: the key index that counts entries may still be building.
SYNC_CHARS = 200_000

Known = Callable[[PaperRecord], bool]


def _stored(rec: PaperRecord) -> StoredPaper:
    return StoredPaper(**{f.name: getattr(rec, f.name) for f in fields(PaperRecord)})


@dataclass
class BibOverlay:
    """The ``.bib`` entries a store lacks, as papers (id 0, the ``.bib``'s key), and their BM25
    index (``None`` when there are none)."""

    papers: list[StoredPaper]
    index: BM25Index | None
    _keys: dict[str, StoredPaper] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def build(
        cls, texts: Iterable[tuple[str, str]], known: Known | None = None, base: BM25Index | None = None
    ) -> BibOverlay:
        """Parse ``(path, text)`` pairs (the first file holding a key wins, as in BibTeX), keep the
        entries ``known`` does not recognise as stored, and index them with ``base``'s statistics
        (a standalone index when ``base`` is None or empty)."""
        seen: set[str] = set()
        papers: list[StoredPaper] = []
        for path, text in texts:
            for rec in iter_bibtex_text(text, path):
                if not isinstance(rec, PaperRecord) or not rec.key or rec.key in seen:
                    continue
                seen.add(rec.key)
                if known is None or not known(rec):
                    papers.append(_stored(rec))
        if not papers:
            return cls([], None)
        base = base if base is not None and base.size else None
        docs = ((i, p.title, p.abstract, p.keywords) for i, p in enumerate(papers))
        return cls(papers, BM25Index.build(docs, base.params if base else None, base=base))

    @classmethod
    def from_titles(cls, bib: BibIndex) -> BibOverlay:
        """Every entry by its title alone, from the key index the server already holds (no BibTeX
        parse: milliseconds for thousands of entries): what ranks a large bibliography while its
        full overlay is read and there is no store to rank by."""
        papers = [
            StoredPaper(title=ids.title or key, key=key, doi=ids.doi, arxiv=ids.arxiv)
            for key, ids in bib.entries.items()
        ]
        if not papers:
            return cls([], None)
        return cls(papers, BM25Index.build((i, p.title, "", "") for i, p in enumerate(papers)))

    def __len__(self) -> int:
        return len(self.papers)

    def hits(self, text: str, k: int) -> list[tuple[StoredPaper, float]]:
        """The entries whose words ``text`` shares, best first (score > 0), at most ``k``."""
        if self.index is None or not text.strip():
            return []
        return [(self.papers[int(pos)], score) for pos, score in self.index.search(text, k) if score > 0]

    def by_key(self, key: str) -> StoredPaper | None:
        """The entry under ``key`` as the ``.bib`` describes it (None: the store holds it, or no such key)."""
        if self._keys is None:
            self._keys = {p.key: p for p in self.papers}
        return self._keys.get(key)


def merge_entries(
    ranked: Sequence[Recommendation], hits: Sequence[tuple[StoredPaper, float]], store_scores: Sequence[float]
) -> list[Recommendation]:
    """``ranked`` (the store's list) with the overlay's ``hits`` placed where the store's word
    ranking would put them: after as many papers as the store has papers scoring higher than the
    entry on the same text (``store_scores``: the store's BM25 scores of its top papers for it).

    Why this rule: the overlay is scored on the store's scale, so "k stored papers beat it by
    words" is the entry's rank had it been imported; it needs no weight tuned on any dev set, and
    an entry the sentence does not find (score 0) is not offered at all."""
    desc = sorted(-s for s in store_scores)  # ascending negated: bisect counts higher scores
    out = list(ranked)
    for placed, (paper, score) in enumerate(sorted(hits, key=lambda h: -h[1])):
        above = bisect.bisect_left(desc, -score)  # store papers scoring strictly higher
        cand = Candidate(0, float(score), {SOURCE: float(score)}, {SOURCE: placed + 1})
        out.insert(min(above + placed, len(out)), Recommendation(paper, cand))
    return out


def with_entries(
    ranked: Sequence[Recommendation],
    overlay: BibOverlay | None,
    rec: Recommender | None,
    query: ContextQuery,
    k: int,
) -> list[Recommendation]:
    """The slot's list with the workspace's own entries the store lacks, ranked by the query's
    keystroke view (``local+title``): :func:`merge_entries` against the store's scores for it."""
    if overlay is None or not len(overlay):
        return list(ranked)
    text = view_text(query, FAST_VIEW[0])
    hits = overlay.hits(text, k)
    if not hits:
        return list(ranked)
    store_scores: list[float] = []
    if rec is not None and ranked:
        try:
            store_scores = [s for _pid, s in rec.bm25.search(text, max(k, len(ranked)))]
        except Exception as exc:  # a remote engine that cannot answer: the entries go last
            log.info("store scores for the .bib overlay failed: %s", exc)
            store_scores = [float("inf")] * len(ranked)
    return merge_entries(ranked, hits, store_scores)


def store_knows(rec: Recommender) -> Known:
    """Whether the store holds a ``.bib`` record's paper (by DOI, arXiv id, title, then key)."""
    library = rec.library

    def known(record: PaperRecord) -> bool:
        return (
            library.for_entry(record.key, record.doi, record.arxiv, normalize_title(record.title)) is not None
        )

    return known


def _has_papers(rec: Recommender) -> bool:
    bm25 = rec.bm25
    return not isinstance(bm25, BM25Index) or bm25.size > 0


@dataclass
class _Built:
    texts: tuple[tuple[str, str], ...]
    rec: Recommender | None
    overlay: BibOverlay


class OverlayCache:
    """One overlay per (``.bib`` texts, served recommender): built on the caller's worker thread
    for a small bibliography, in ``pool`` for a large one (``on_ready`` then asks for a new
    analysis); the last overlay of the same texts serves meanwhile."""

    def __init__(self, pool: Executor, on_ready: Callable[[], None] | None = None, size: int = 8) -> None:
        self._pool = pool
        self._on_ready = on_ready
        self._size = size
        self._lock = threading.Lock()
        self._built: list[_Built] = []
        self._building: set[tuple[int, int]] = set()
        self._title_overlay: tuple[BibIndex, BibOverlay] | None = None
        self._latest: tuple | None = None  # the last large overlay asked for
        self._small: dict[tuple, threading.Event] = {}  # small overlays being built, by (texts, store)

    def get(self, texts: dict[str, str | None], rec: Recommender | None, bib: BibIndex) -> BibOverlay | None:
        """The overlay of ``texts`` over ``rec``'s store. A large bibliography's is built in the
        background; meanwhile an earlier overlay of the same texts serves, or, with no store or an
        empty one, every entry by its title (:meth:`BibOverlay.from_titles`). ``bib``: the texts'
        key index."""
        key_texts = tuple((p, t) for p, t in texts.items() if t)
        with self._lock:
            stale = None
            for b in self._built:
                if b.texts == key_texts:
                    if b.rec is rec:
                        return b.overlay
                    stale = b.overlay
        if sum(len(t) for _p, t in key_texts) <= SYNC_CHARS:
            return self._build_once(key_texts, rec)
        tag = (hash(key_texts), id(rec))
        with self._lock:
            self._latest = tag
            if tag not in self._building:
                self._building.add(tag)
                self._pool.submit(self._build_async, key_texts, rec, tag)
        if stale is None and (rec is None or not _has_papers(rec)):
            stale = self._titles(bib)  # nothing stored to rank by, or to hold an entry twice
        return stale

    def prepare(self, texts: dict[str, str | None], rec: Recommender | None, bib: BibIndex) -> None:
        """Build the overlay of a draft just analysed in the pool, before its first completion asks
        (which then finds it built, or waits for the build under way instead of doing it twice)."""
        self._pool.submit(self.get, dict(texts), rec, bib)

    def _build_once(self, texts: tuple[tuple[str, str], ...], rec: Recommender | None) -> BibOverlay:
        """Build a small overlay on this thread, or wait for the thread already building it."""
        tag = (hash(texts), id(rec))
        with self._lock:
            pending = self._small.get(tag)
            mine = pending is None
            if mine:
                pending = self._small[tag] = threading.Event()
        assert pending is not None
        if not mine:
            pending.wait(30)
            with self._lock:
                done = next((b.overlay for b in self._built if b.texts == texts and b.rec is rec), None)
            return done if done is not None else self._build(texts, rec)  # the other build failed
        try:
            return self._build(texts, rec)
        finally:
            with self._lock:
                self._small.pop(tag, None)
            pending.set()

    def building(self) -> bool:
        """Whether an overlay is being built (a completion then asks the client to ask again)."""
        with self._lock:
            return bool(self._building)

    def _titles(self, bib: BibIndex) -> BibOverlay:
        with self._lock:
            if self._title_overlay is not None and self._title_overlay[0] is bib:
                return self._title_overlay[1]
        overlay = BibOverlay.from_titles(bib)
        with self._lock:
            self._title_overlay = (bib, overlay)
        return overlay

    def _build(self, texts: tuple[tuple[str, str], ...], rec: Recommender | None) -> BibOverlay:
        base = rec.bm25 if rec is not None and isinstance(rec.bm25, BM25Index) else None
        overlay = BibOverlay.build(texts, store_knows(rec) if rec is not None else None, base)
        with self._lock:
            self._built = [b for b in self._built if not (b.texts == texts and b.rec is rec)]
            self._built.append(_Built(texts, rec, overlay))
            del self._built[: -self._size]
        return overlay

    def _build_async(self, texts: tuple[tuple[str, str], ...], rec: Recommender | None, tag: tuple) -> None:
        """Build one overlay in the pool, unless a newer text was asked for meanwhile (a large
        ``.bib`` being edited queues one build per version: only the last is worth its seconds)."""
        try:
            with self._lock:
                superseded = tag != self._latest
            if not superseded:
                self._build(texts, rec)
        except Exception:  # a parser bug must not leave the overlay "building" forever
            log.exception("indexing the workspace's .bib entries failed")
        finally:
            with self._lock:
                self._building.discard(tag)
        if self._on_ready is not None:
            self._on_ready()
