"""BM25 for long, context-sized queries: an in-memory inverted index with precomputed impacts.

Why not FTS5's ``bm25()`` alone: a citing sentence is a 20-40 word OR-query, and FTS5 scores it
in ~210 ms on the ACM-CR store (780 ms with the citing title and abstract added), far too slow
for a keystroke. Precomputing each posting's BM25 impact turns a query into a few numpy
scatter-adds over the postings of its terms: a few milliseconds. FTS5 stays the source of
truth (and serves short author/title lookups); this index is derived from the store, saved
beside it, and rebuilt when the store's generation changes.

Tokenisation: Unicode folded to ASCII, lower case, ``[a-z0-9]+`` runs, English stopwords
dropped, Porter stemming (PyStemmer) -- close to FTS5's ``porter unicode61`` tokenizer.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import Stemmer

from .index_files import clean_orphans, restore_orphan
from .store import Store

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each et al few for from further had
    has have having he her here hers herself him himself his how however i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these they
    this those through thus to too under until up upon us very was we were what when where which while
    who whom why will with within without would you your yours yourself yourselves e g eg ie i e via
    may might must shall one two use used using based paper propose proposed show shows shown""".split()
)

_TOKEN_RE = re.compile(r"[a-z0-9]+")
INDEX_VERSION = 2
_ARRAYS = ("doc_ids", "offsets", "postings", "impacts")

log = logging.getLogger(__name__)


class Tokenizer:
    """Text to stemmed terms, with a stem cache (the vocabulary is small, the text is large)."""

    def __init__(self) -> None:
        self._stemmer = Stemmer.Stemmer("porter")
        self._cache: dict[str, str] = {}

    def __call__(self, text: str) -> list[str]:
        if not text:
            return []
        if not text.isascii():
            text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
        words = [w for w in _TOKEN_RE.findall(text.lower()) if w not in STOPWORDS and len(w) < 40]
        cache = self._cache
        missing = [w for w in set(words) if w not in cache]
        if missing:
            for w, s in zip(missing, self._stemmer.stemWords(missing), strict=True):
                cache[w] = s
        return [cache[w] for w in words]


@dataclass
class BM25Params:
    """BM25 parameters and field weights (title, abstract, keywords); tuned on ACM-CR dev."""

    k1: float = 1.2
    b: float = 0.75
    w_title: float = 1.0
    w_abstract: float = 1.0
    w_keywords: float = 1.0


@dataclass
class _TermCounts:
    """Weighted term frequencies of a batch of papers, gathered in one pass over ``docs``.

    Kept as Python lists while counting (the batch size is unknown: ``docs`` is a stream) and
    turned into the flat posting arrays by ``BM25Index.build`` once all documents are seen."""

    ids: list[int]
    lengths: list[float]
    vocab: dict[str, int]  # term -> term id, in first-seen order
    term_docs: list[list[int]]  # term id -> positions of the papers that contain it
    term_tfs: list[list[float]]  # term id -> field-weighted frequency in each of those papers


def _count_terms(
    docs: Iterable[tuple[int, str, str, str]], params: BM25Params, on_doc: Callable[[], None] | None
) -> _TermCounts:
    """Tokenise each paper's fields and count terms, weighting each field by ``params`` (a title word
    counts more than an abstract word); ``on_doc`` ticks once per paper for progress bars."""
    tok = Tokenizer()
    out = _TermCounts(ids=[], lengths=[], vocab={}, term_docs=[], term_tfs=[])
    for pos, (pid, title, abstract, keywords) in enumerate(docs):
        counts: Counter[str] = Counter()
        for text, w in (
            (title, params.w_title),
            (abstract, params.w_abstract),
            (keywords, params.w_keywords),
        ):
            if w and text:
                for t in tok(text):
                    counts[t] += w
        out.ids.append(pid)
        out.lengths.append(sum(counts.values()))
        for term, tf in counts.items():
            tid = out.vocab.get(term)
            if tid is None:
                tid = out.vocab[term] = len(out.term_docs)
                out.term_docs.append([])
                out.term_tfs.append([])
            out.term_docs[tid].append(pos)
            out.term_tfs[tid].append(tf)
        if on_doc is not None:
            on_doc()
    return out


class BM25Index:
    """Term -> (paper ids, BM25 impacts) for every paper of a store.

    ``doc_ids[i]`` is the store id of document ``i``; postings hold document positions.
    """

    def __init__(
        self,
        doc_ids: np.ndarray,
        vocab: dict[str, int],
        offsets: np.ndarray,
        postings: np.ndarray,
        impacts: np.ndarray,
        params: BM25Params,
        generation: int,
    ) -> None:
        self.doc_ids = doc_ids
        self.vocab = vocab
        self.offsets = offsets
        self.postings = postings
        self.impacts = impacts
        self.params = params
        self.generation = generation
        self.built_at = 0.0  # store clock (papers.updated_at) when the base was read
        self.tokenizer = Tokenizer()
        self._pos_of_id: dict[int, int] | None = None
        # A small layer for papers added or changed since the base was built (see with_delta):
        # ``_alive`` masks base documents that were changed or removed, ``_delta`` scores the new text.
        self._delta: BM25Index | None = None
        self._alive: np.ndarray | None = None
        self.base_ids = doc_ids

    @property
    def size(self) -> int:
        return int(self.doc_ids.shape[0])

    @property
    def delta_size(self) -> int:
        return self._delta.size if self._delta is not None else 0

    def document_frequency(self, term: str) -> int:
        tid = self.vocab.get(term)
        return 0 if tid is None else int(self.offsets[tid + 1] - self.offsets[tid])

    def with_delta(
        self, changed: Iterable[tuple[int, str, str, str]], removed: Iterable[int], generation: int
    ) -> BM25Index:
        """A copy that also serves ``changed`` papers and no longer returns ``removed`` ones.

        Why: rebuilding 110k papers takes ~25 s of pure-Python CPU (holding the GIL the editor's
        keystrokes need) for a one-entry .bib edit. The delta is scored with the base's
        statistics (N, average length, document frequencies), so its scores are comparable.
        """
        changed = list(changed)
        gone = {int(x) for x in removed} | {pid for pid, *_ in changed}
        alive = ~np.isin(self.base_ids, np.fromiter(gone, dtype=np.int64, count=len(gone)))
        out = BM25Index(
            self.base_ids, self.vocab, self.offsets, self.postings, self.impacts, self.params, generation
        )
        out.built_at = self.built_at
        out._alive = alive
        out._delta = BM25Index.build(changed, self.params, generation, base=self) if changed else None
        if out._delta is not None:
            out.doc_ids = np.concatenate([self.base_ids, out._delta.doc_ids])
        return out

    # -- building -----------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        docs: Iterable[tuple[int, str, str, str]],
        params: BM25Params | None = None,
        generation: int = 0,
        on_doc: Callable[[], None] | None = None,
        base: BM25Index | None = None,
    ) -> BM25Index:
        """Index (paper id, title, abstract, keywords) tuples (with ``base``'s statistics for a delta)."""
        params = params or BM25Params()
        counted = _count_terms(docs, params, on_doc)
        ids, vocab, term_docs, term_tfs = counted.ids, counted.vocab, counted.term_docs, counted.term_tfs
        n = len(ids)
        dl = np.asarray(counted.lengths, dtype=np.float32)
        avgdl = float(dl.mean()) if n else 1.0
        if base is not None:
            avgdl = base.avgdl
            n_all = base.size + n
        norm = params.k1 * (1.0 - params.b + params.b * dl / max(avgdl, 1e-9))
        terms_of = list(vocab)  # term ids are assigned in insertion order
        sizes = np.fromiter((len(d) for d in term_docs), dtype=np.int64, count=len(term_docs))
        offsets = np.zeros(len(term_docs) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        postings = np.empty(int(offsets[-1]), dtype=np.int32)
        impacts = np.empty(int(offsets[-1]), dtype=np.float32)
        for tid, (d, tf) in enumerate(zip(term_docs, term_tfs, strict=True)):
            lo, hi = offsets[tid], offsets[tid + 1]
            d_arr = np.asarray(d, dtype=np.int32)
            tf_arr = np.asarray(tf, dtype=np.float32)
            df = len(d)
            if base is not None:
                df += base.document_frequency(terms_of[tid])
                idf = np.log(1.0 + (n_all - df + 0.5) / (df + 0.5))
            else:
                idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))  # Lucene's non-negative idf
            postings[lo:hi] = d_arr
            impacts[lo:hi] = idf * tf_arr * (params.k1 + 1.0) / (tf_arr + norm[d_arr])
        index = cls(np.asarray(ids, dtype=np.int64), vocab, offsets, postings, impacts, params, generation)
        index.avgdl = avgdl
        return index

    @classmethod
    def from_store(
        cls, store: Store, params: BM25Params | None = None, on_doc: Callable[[], None] | None = None
    ) -> BM25Index:
        generation = store.generation
        built_at = store.clock()
        rows = store.conn.execute("SELECT id, title, abstract, keywords FROM papers ORDER BY id")
        index = cls.build(rows, params, generation, on_doc)
        index.built_at = built_at
        return index

    # -- persistence --------------------------------------------------------------------------
    def save(self, folder: str | os.PathLike[str]) -> None:
        """Write atomically: a complete new folder is renamed into place, so readers never see half.

        ``meta.json`` records every file's size, so a truncated file is caught on load. Folders
        left by a process killed mid-save (``.tmp<pid>.*``, ``.old<pid>``) are cleaned up here,
        and a complete old index orphaned between the two renames is put back by :meth:`load`.
        """
        folder = Path(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        if self._delta is not None or self._alive is not None:
            raise ValueError("save the base index only (rebuild to fold a delta in)")
        clean_orphans(folder)
        tmp = Path(tempfile.mkdtemp(prefix=f"{folder.name}.tmp{os.getpid()}.", dir=folder.parent))
        try:
            for name in _ARRAYS:
                np.save(tmp / f"{name}.npy", getattr(self, name))
            terms = [""] * len(self.vocab)
            for t, i in self.vocab.items():
                terms[i] = t
            (tmp / "terms.txt").write_text("\n".join(terms), encoding="utf-8")
            sizes = {f.name: f.stat().st_size for f in tmp.iterdir()}
            meta = {
                "version": INDEX_VERSION,
                "generation": self.generation,
                "params": self.params.__dict__,
                "avgdl": self.avgdl,
                "built_at": self.built_at,
                "sizes": sizes,
            }
            (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
            old = None
            if folder.exists():
                old = folder.with_name(folder.name + f".old{os.getpid()}")
                if old.exists():
                    shutil.rmtree(old)
                folder.rename(old)
            tmp.rename(folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> BM25Index | None:
        """The saved index, or None when missing, of another version, or damaged (logged)."""
        index, problem = cls.load_checked(folder)
        if problem:
            log.warning("%s: search index damaged (%s); it is rebuilt on next use", folder, problem)
        return index

    @classmethod
    def load_checked(cls, folder: str | os.PathLike[str]) -> tuple[BM25Index | None, str]:
        """(index, "") when sound; (None, "") when missing or of another version; (None, why) when
        damaged. Every structural invariant a search relies on is checked, so a truncated or
        corrupt file is reported and rebuilt instead of crashing a search with an IndexError."""
        folder = Path(folder)
        restore_orphan(folder)
        if not (folder / "meta.json").exists():
            return None, ""
        try:
            meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
            if not isinstance(meta, dict):
                return None, "meta.json is not an object"
            if meta.get("version") != INDEX_VERSION:
                return None, ""
            for name, size in (meta.get("sizes") or {}).items():
                actual = (folder / name).stat().st_size
                if actual != size:
                    return None, f"{name} has {actual} bytes, {size} expected"
            terms = (folder / "terms.txt").read_text(encoding="utf-8").split("\n")
            arrays = {name: np.load(folder / f"{name}.npy", allow_pickle=False) for name in _ARRAYS}
            problem = _check_arrays(arrays, len(terms))
            if problem:
                return None, problem
            vocab = {t: i for i, t in enumerate(terms)}
            if len(vocab) != len(terms) and len(terms) > 1:
                return None, "terms.txt repeats terms"
            index = cls(
                arrays["doc_ids"],
                vocab,
                arrays["offsets"],
                arrays["postings"],
                arrays["impacts"],
                BM25Params(**meta["params"]),
                int(meta["generation"]),
            )
            index.avgdl = float(meta["avgdl"])
            index.built_at = float(meta["built_at"])
            return index, ""
        except (OSError, ValueError, KeyError, TypeError, EOFError, UnicodeDecodeError) as exc:
            return None, f"{type(exc).__name__}: {exc}"

    # -- search -------------------------------------------------------------------------------
    def idf(self, term: str) -> float:
        df = self.document_frequency(term)
        return float(np.log(1.0 + (self.size - df + 0.5) / (df + 0.5))) if df else 0.0

    def expansion_terms(self, texts: list[str], n_terms: int = 20) -> Counter[str]:
        """Pseudo-relevance feedback: the terms that best characterise the top documents' texts
        (length-normalised tf times idf, summed over documents), as a query term Counter."""
        weights: Counter[str] = Counter()
        for text in texts:
            tf = Counter(self.tokenizer(text))
            length = sum(tf.values()) or 1
            for term, count in tf.items():
                weights[term] += count / length * self.idf(term)
        return Counter({t: 1 for t, _ in weights.most_common(n_terms)})

    def scores(self, text: str | Counter[str], dedupe: bool = False) -> np.ndarray:
        """BM25 score of every document for a free-text query (query term frequency counts), or for
        a Counter of already tokenised query terms."""
        base = self._base_scores(text, dedupe)
        if self._alive is not None:
            base *= self._alive
        if self._delta is None:
            return base
        return np.concatenate([base, self._delta._base_scores(text, dedupe)])

    def _base_scores(self, text: str | Counter[str], dedupe: bool) -> np.ndarray:
        scores = np.zeros(self.base_ids.shape[0], dtype=np.float32)
        terms = text if isinstance(text, Counter) else Counter(self.tokenizer(text))
        for term, qtf in terms.items():
            tid = self.vocab.get(term)
            if tid is None:
                continue
            lo, hi = self.offsets[tid], self.offsets[tid + 1]
            w = 1.0 if dedupe else float(qtf)
            if w == 1.0:
                scores[self.postings[lo:hi]] += self.impacts[lo:hi]
            else:
                scores[self.postings[lo:hi]] += w * self.impacts[lo:hi]
        return scores

    def search(
        self, text: str | Counter[str], k: int = 10, mask: np.ndarray | None = None, dedupe: bool = False
    ) -> list[tuple[int, float]]:
        """Top-k (paper id, score), best first. ``mask`` (bool per document) keeps only True ones."""
        scores = self.scores(text, dedupe=dedupe)
        if mask is not None:
            scores = np.where(mask, scores, -1.0)
        return top_k(scores, k, self.doc_ids)

    def position(self, paper_id: int) -> int | None:
        if self._pos_of_id is None:
            self._pos_of_id = {int(p): i for i, p in enumerate(self.doc_ids)}
        return self._pos_of_id.get(paper_id)

    def mask_for(self, allowed_ids: Iterable[int]) -> np.ndarray:
        """Boolean document mask from a set of allowed paper ids."""
        allowed = np.fromiter(allowed_ids, dtype=np.int64)
        return np.isin(self.doc_ids, allowed)


def top_k(scores: np.ndarray, k: int, ids: np.ndarray) -> list[tuple[int, float]]:
    """The k best (id, score) with score > 0, best first, ties broken by position (stable)."""
    k = min(k, scores.shape[0])
    if k <= 0:
        return []
    part = np.argpartition(-scores, k - 1)[:k]
    order = part[np.lexsort((part, -scores[part]))]
    return [(int(ids[i]), float(scores[i])) for i in order if scores[i] > 0]


def _check_arrays(arrays: dict[str, np.ndarray], n_terms: int) -> str:
    """Why the loaded arrays cannot be searched safely ("" when they can)."""
    ids, offsets, postings, impacts = (arrays[n] for n in _ARRAYS)
    if any(a.ndim != 1 for a in arrays.values()):
        return "an array is not one-dimensional"
    if offsets.shape[0] != n_terms + 1 and not (n_terms == 1 and offsets.shape[0] == 1):
        return f"{n_terms} terms but {offsets.shape[0] - 1} posting lists"
    if not np.issubdtype(offsets.dtype, np.integer) or not np.issubdtype(postings.dtype, np.integer):
        return "offsets or postings are not integers"
    if offsets[0] != 0 or offsets[-1] != postings.shape[0] or postings.shape[0] != impacts.shape[0]:
        return "posting offsets do not match the postings"
    if offsets.shape[0] > 1 and bool((np.diff(offsets) < 0).any()):
        return "posting offsets are not increasing"
    if postings.shape[0] and (int(postings.min()) < 0 or int(postings.max()) >= ids.shape[0]):
        return "a posting points past the documents"
    if not bool(np.isfinite(impacts).all()):
        return "impacts are not finite numbers"
    return ""


def index_folder(store: Store) -> Path:
    """Where a store's BM25 index lives: beside the SQLite file."""
    return store.path.with_name(store.path.name + ".bm25")


MAX_DELTA = 5000  # more changed papers than this: a full rebuild is worth its time


def _with_store_delta(store: Store, index: BM25Index) -> BM25Index | None:
    """The saved base plus a delta for what changed in the store since, or None if too much did."""
    generation = store.generation
    changed = store.conn.execute(
        "SELECT id, title, abstract, keywords FROM papers WHERE updated_at > ? ORDER BY id LIMIT ?",
        (index.built_at, MAX_DELTA + 1),
    ).fetchall()
    if len(changed) > MAX_DELTA:
        return None
    present = np.fromiter((pid for (pid,) in store.conn.execute("SELECT id FROM papers")), dtype=np.int64)
    removed = index.base_ids[~np.isin(index.base_ids, present)]
    return index.with_delta(changed, removed.tolist(), generation)


def load_or_build(
    store: Store,
    params: BM25Params | None = None,
    on_doc: Callable[[], None] | None = None,
    save: bool = True,
    allow_delta: bool = True,
) -> BM25Index:
    """The store's BM25 index: loaded; or the saved base plus a delta of what changed since (a
    few thousand papers at most); or rebuilt (and saved) when missing, built with other params,
    or far behind. ``allow_delta=False`` forces the full rebuild (``citewise index`` does)."""
    folder = index_folder(store)
    index, problem = BM25Index.load_checked(folder)
    if problem:
        log.warning("%s: search index damaged (%s); rebuilding it", folder, problem)
    want = params or BM25Params()
    if index is not None and index.generation == store.generation and index.params == want:
        return index
    if index is not None and allow_delta and index.params == want:
        layered = _with_store_delta(store, index)
        if layered is not None:
            return layered
    log.info("%s: building the search index (%d papers)", folder, store.count())
    t0 = time.perf_counter()
    index = BM25Index.from_store(store, want, on_doc)
    index.build_seconds = time.perf_counter() - t0  # type: ignore[attr-defined]
    if save:
        try:
            index.save(folder)
        except OSError as exc:  # a read-only folder: serve from memory, rebuild next time
            log.warning(
                "%s: could not save the search index (%s); it is rebuilt in memory on each start",
                folder,
                exc.strerror or exc,
            )
    return index


_FTS_SAFE = re.compile(r"[^\w]+", re.UNICODE)


def fts_or_query(text: str, max_terms: int = 64) -> str:
    """An FTS5 OR-expression of the content words of free text (quoted, so no syntax leaks)."""
    words: list[str] = []
    seen: set[str] = set()
    for w in _FTS_SAFE.split(text.lower()):
        if w and w not in STOPWORDS and w not in seen:
            seen.add(w)
            words.append(f'"{w}"')
        if len(words) >= max_terms:
            break
    return " OR ".join(words)
