"""BM25 for long, context-sized queries: an in-memory inverted index with precomputed impacts.

Why not FTS5's ``bm25()`` alone: a citing sentence is a 20-40 word OR-query, and FTS5 scores it
in ~210 ms on the ACM-CR store (780 ms with the citing title and abstract added), far too slow
for a keystroke. Precomputing each posting's BM25 impact turns a query into a few numpy
scatter-adds over the postings of its terms: a few milliseconds. FTS5 stays the source of
truth (and serves short author/title lookups); this index is derived from the store, saved
beside it, and rebuilt when the store's generation changes (:mod:`citewise.indexer.bm25_files`).

Tokenisation: Unicode folded to ASCII, lower case, ``[a-z0-9]+`` runs, English stopwords
dropped, Porter stemming (PyStemmer) -- close to FTS5's ``porter unicode61`` tokenizer.

Document expansion (``docs/citation-expansion.md``): a paper's citing sentences and citing titles
(``indexer/citations.py``) are a fourth field, BM25F-style: its term frequencies are normalised by
its own length before saturation, so a paper cited 500 times is not penalised for a long field,
and a paper without citers scores exactly as without expansion. The number of papers citing each
document is saved with the index (the citation-count prior of ``models/prefetch.py``).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
import Stemmer

from . import citations
from .mapped_pages import MappedBudget
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
    # The citing field (sentences and titles of citing papers); 0 leaves it out.
    w_citing: float = 1.0


Doc = tuple  # (paper id, title, abstract, keywords[, citing text, number of citing papers])


def idf(n: int, df: int) -> float:
    """Lucene's non-negative BM25 idf of a term in ``df`` of ``n`` papers (0 for an unknown term)."""
    return float(np.log(1.0 + (n - df + 0.5) / (df + 0.5))) if df else 0.0


def feedback_terms(
    texts: list[Counter[str]], idf_of: Callable[[set[str]], dict[str, float]], n_terms: int = 20
) -> Counter[str]:
    """Pseudo-relevance feedback: the terms that best characterise the top documents' texts
    (length-normalised tf times idf, summed over documents), as a query term Counter. ``idf_of``
    gives the idf of a set of terms at once (a remote engine answers it in one round trip)."""
    idfs = idf_of({t for tf in texts for t in tf})
    weights: Counter[str] = Counter()
    for tf in texts:
        length = sum(tf.values()) or 1
        for term, count in tf.items():
            weights[term] += count / length * idfs.get(term, 0.0)  # type: ignore[assignment]  # typeshed types Counter values as int; float weights are documented
    return Counter({t: 1 for t, _ in weights.most_common(n_terms)})


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
    # Citing-field frequencies, sparse (most papers are cited by nobody, so the common path costs
    # nothing more): (term id, slot in that term's posting list, frequency).
    citing_tfs: list[tuple[int, int, float]] = field(default_factory=list)
    citing_lengths: list[float] = field(default_factory=list)
    citing_counts: list[int] = field(default_factory=list)


def _count_terms(docs: Iterable[Doc], params: BM25Params, on_doc: Callable[[], None] | None) -> _TermCounts:
    """Tokenise each paper's fields and count terms, weighting each field by ``params`` (a title word
    counts more than an abstract word); the citing field is counted apart (its own length
    normalisation, see :meth:`BM25Index.build`); ``on_doc`` ticks once per paper for progress bars."""
    tok = Tokenizer()
    out = _TermCounts(ids=[], lengths=[], vocab={}, term_docs=[], term_tfs=[])
    for pos, (pid, title, abstract, keywords, *citing) in enumerate(docs):
        counts: Counter[str] = Counter()
        for text, w in (
            (title, params.w_title),
            (abstract, params.w_abstract),
            (keywords, params.w_keywords),
        ):
            if w and text:
                for t in tok(text):
                    counts[t] += w  # type: ignore[assignment]  # typeshed types Counter values as int; float weights are documented
        ccounts = Counter(tok(citing[0])) if citing and citing[0] and params.w_citing else Counter()
        out.ids.append(pid)
        out.lengths.append(sum(counts.values()))
        out.citing_lengths.append(float(sum(ccounts.values())))
        out.citing_counts.append(int(citing[1]) if len(citing) > 1 else 0)
        for term, tf in counts.items():
            _post(out, term, pos, tf)
        for term, ctf in ccounts.items():
            tid = out.vocab.get(term)
            if tid is None or out.term_docs[tid][-1] != pos:  # a word of the citing field only
                tid = _post(out, term, pos, 0.0)
            out.citing_tfs.append((tid, len(out.term_docs[tid]) - 1, float(ctf)))
        if on_doc is not None:
            on_doc()
    return out


def _document_frequency(own: int, term: str, base: BM25Index | None, in_base: bool) -> int:
    """A term's document frequency for a build: ``own`` papers of the build hold it, plus the
    base's (a delta); or the base's alone when the papers are already counted in it."""
    if base is None:
        return own
    known = base.document_frequency(term)
    return max(known, 1) if in_base else own + known


def _post(out: _TermCounts, term: str, pos: int, tf: float) -> int:
    """Append document ``pos`` with frequency ``tf`` to ``term``'s postings; returns the term id."""
    tid = out.vocab.get(term)
    if tid is None:
        tid = out.vocab[term] = len(out.term_docs)
        out.term_docs.append([])
        out.term_tfs.append([])
    out.term_docs[tid].append(pos)
    out.term_tfs[tid].append(tf)
    return tid


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
        self.avgdl = 1.0
        self.avgcl = 1.0  # mean length of the citing field over papers that have one
        self.citing_counts = np.zeros(doc_ids.shape[0], dtype=np.int32)  # papers citing each document
        self.tokenizer = Tokenizer()
        self._pos_table: np.ndarray | None = None  # paper id -> document position (-1: none)
        # A small layer for papers added or changed since the base was built (see with_delta):
        # ``_alive`` masks base documents that were changed or removed, ``_delta`` scores the new text.
        self._delta: BM25Index | None = None
        self._alive: np.ndarray | None = None
        self.base_ids = doc_ids
        # How much of a memory-mapped index stays mapped (set by bm25_files for a mapped index).
        self.mapped: MappedBudget | None = None

    @property
    def size(self) -> int:
        return int(self.doc_ids.shape[0])

    @property
    def layered(self) -> bool:
        """A delta or removals over the base: such an index serves but is not saved as it is."""
        return self._delta is not None or self._alive is not None

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
        out.built_at, out.avgdl, out.avgcl = self.built_at, self.avgdl, self.avgcl
        out.citing_counts, out.mapped = self.citing_counts, self.mapped
        out._alive = alive
        out._delta = BM25Index.build(changed, self.params, generation, base=self) if changed else None
        if out._delta is not None:
            out.doc_ids = np.concatenate([self.base_ids, out._delta.doc_ids])
            out.citing_counts = np.concatenate([self.citing_counts, out._delta.citing_counts])
        return out

    # -- building -----------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        docs: Iterable[Doc],
        params: BM25Params | None = None,
        generation: int = 0,
        on_doc: Callable[[], None] | None = None,
        base: BM25Index | None = None,
        in_base: bool = False,
    ) -> BM25Index:
        """Index (paper id, title, abstract, keywords[, citing text, citing papers]) tuples (with
        ``base``'s statistics for a delta; ``in_base``: the papers are already counted in the
        base's N and document frequencies, so they are scored exactly as the base scores them).

        BM25F over two field groups: the paper's own fields share one length normalisation ``B``,
        the citing field has its own ``C``; ``tf~ = tf / B + w_citing * ctf / C`` is then
        saturated once. Without citing text this is exactly the plain BM25 of the own fields."""
        params = params or BM25Params()
        counted = _count_terms(docs, params, on_doc)
        n = len(counted.ids)
        dl = np.asarray(counted.lengths, dtype=np.float32)
        cl = np.asarray(counted.citing_lengths, dtype=np.float32)
        avgdl = float(dl.mean()) if n else 1.0
        avgcl = float(cl[cl > 0].mean()) if bool((cl > 0).any()) else 1.0
        n_all = n
        if base is not None:
            avgdl, avgcl, n_all = base.avgdl, base.avgcl, base.size + (0 if in_base else n)
        own_norm = 1.0 - params.b + params.b * dl / max(avgdl, 1e-9)
        citing_norm = 1.0 - params.b + params.b * cl / max(avgcl, 1e-9)
        terms_of = list(counted.vocab)  # term ids are assigned in insertion order
        citing = _by_term(counted.citing_tfs)
        sizes = np.fromiter((len(d) for d in counted.term_docs), dtype=np.int64, count=len(terms_of))
        offsets = np.zeros(len(terms_of) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        postings = np.empty(int(offsets[-1]), dtype=np.int32)
        impacts = np.empty(int(offsets[-1]), dtype=np.float32)
        for tid, d in enumerate(counted.term_docs):
            lo, hi = offsets[tid], offsets[tid + 1]
            d_arr = np.asarray(d, dtype=np.int32)
            tf = np.asarray(counted.term_tfs[tid], dtype=np.float32) / own_norm[d_arr]
            if tid in citing:
                slots, ctf = citing[tid]
                tf[slots] += params.w_citing * ctf / citing_norm[d_arr[slots]]
            df = _document_frequency(len(d), terms_of[tid], base, in_base)
            idf = np.log(1.0 + (n_all - df + 0.5) / (df + 0.5))  # Lucene's non-negative idf
            postings[lo:hi] = d_arr
            impacts[lo:hi] = idf * tf * (params.k1 + 1.0) / (tf + params.k1)
        index = cls(
            np.asarray(counted.ids, dtype=np.int64),
            counted.vocab,
            offsets,
            postings,
            impacts,
            params,
            generation,
        )
        index.citing_counts = np.asarray(counted.citing_counts, dtype=np.int32)
        index.avgdl, index.avgcl = avgdl, avgcl
        return index

    @classmethod
    def from_store(
        cls, store: Store, params: BM25Params | None = None, on_doc: Callable[[], None] | None = None
    ) -> BM25Index:
        params = params or BM25Params()
        generation = store.generation
        built_at = store.clock()
        rows = store.conn.execute("SELECT id, title, abstract, keywords FROM papers ORDER BY id")
        index = cls.build(expanded_docs(store, rows, params), params, generation, on_doc)
        index.built_at = built_at
        return index

    # -- search -------------------------------------------------------------------------------
    def idf(self, term: str) -> float:
        return idf(self.size, self.document_frequency(term))

    def doc_impacts(self, docs: Iterable[Doc]) -> Iterator[tuple[int, dict[str, float]]]:
        """Each paper's terms with their BM25 impacts as this index scores its own documents (its
        N, mean lengths and document frequencies): what a remote engine stores so that a query's
        weighted terms score every paper there exactly as here (``engine_milvus``: an inner
        product of the query's term weights with these impacts is :meth:`search`'s score)."""
        part = type(self).build(docs, self.params, base=self, in_base=True)
        by_doc: list[dict[str, float]] = [{} for _ in range(part.size)]
        for tid, term in enumerate(part.vocab):
            lo, hi = int(part.offsets[tid]), int(part.offsets[tid + 1])
            for pos, impact in zip(part.postings[lo:hi].tolist(), part.impacts[lo:hi].tolist(), strict=True):
                by_doc[pos][term] = impact
        return zip(part.doc_ids.tolist(), by_doc, strict=True)

    def idf_of(self, terms: set[str]) -> dict[str, float]:
        """The idf of each of ``terms`` (the engines' common call: a remote one answers it at once)."""
        return {t: self.idf(t) for t in terms}

    def expansion_terms(self, texts: list[str], n_terms: int = 20) -> Counter[str]:
        """Pseudo-relevance feedback (:func:`feedback_terms`) with this index's idf."""
        return feedback_terms([Counter(self.tokenizer(t)) for t in texts], self.idf_of, n_terms)

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
        add = _kernels().add_impacts if self.compiled else numpy_add_impacts
        for term, qtf in terms.items():
            tid = self.vocab.get(term)
            if tid is None:
                continue
            lo, hi = int(self.offsets[tid]), int(self.offsets[tid + 1])
            add(scores, self.postings, self.impacts, lo, hi, 1.0 if dedupe else float(qtf))
        return scores

    @property
    def compiled(self) -> bool:
        """Whether this index scores with the compiled loop (past ``COMPILED_MIN_DOCS``)."""
        return self.base_ids.shape[0] >= COMPILED_MIN_DOCS

    def warm_up(self) -> None:
        """Import and compile (or load from numba's cache) the scoring loop for this index's arrays,
        off the keystroke path: a server calls it while the store opens, so that the first
        keystroke does not wait the ~0.5 s it takes (a read-only memory-mapped array is a type of
        its own to numba, hence these arrays and not any). Nothing for an index scored by numpy."""
        if self.compiled:
            acc = np.zeros(1, dtype=np.float32)
            _kernels().add_impacts(acc, self.postings, self.impacts, 0, 0, 1.0)

    def search(
        self, text: str | Counter[str], k: int = 10, mask: np.ndarray | None = None, dedupe: bool = False
    ) -> list[tuple[int, float]]:
        """Top-k (paper id, score), best first, ties by position. ``mask`` (bool per document)
        keeps only True ones.

        Every document is scored (past ``COMPILED_MIN_DOCS`` by the compiled loop of
        :mod:`citewise.indexer.bm25_kernels`, below by numpy), then the top k is selected
        (:func:`top_k`). Why no dynamic pruning: an exact MaxScore top-k (issue
        28, 2026-11-27) halved a numpy scoring pass at ten million papers, but once the pass was
        compiled it cost 1.5-2x the pass on every measured query (a 19-term sentence leaves
        a third to half of its postings to be scored in full, and millions of candidates);
        ``docs/scaling.md`` has the figures."""
        scores = self.scores(text, dedupe=dedupe)
        if mask is not None:
            scores = np.where(mask, scores, -1.0)
        found = top_k(scores, k, self.doc_ids)
        if self.mapped is not None:
            self.mapped.trim()
        return found

    def position(self, paper_id: int) -> int | None:
        """The document position of a paper (None when not indexed); a changed paper is found
        in the delta, where its current text is."""
        table = self._positions()
        if not 0 <= paper_id < table.shape[0]:
            return None
        pos = int(table[paper_id])
        return pos if pos >= 0 else None

    def _positions(self) -> np.ndarray:
        """Paper id -> document position (-1: none), one int32 a possible id: where a dict of
        ten million ints would take a gigabyte, this takes 40 MB."""
        if self._pos_table is None:
            table = np.full(int(self.doc_ids.max(initial=0)) + 2, -1, dtype=np.int32)
            table[self.doc_ids] = np.arange(self.doc_ids.shape[0], dtype=np.int32)
            self._pos_table = table
        return self._pos_table

    def citing_count(self, paper_ids: list[int]) -> np.ndarray:
        """How many papers cite each of ``paper_ids`` (0 when unknown): the citation-count prior's
        input, looked up for a whole candidate list at once (one dict lookup per candidate cost
        ~25 ms a query on the ACL store)."""
        pos = self._positions_of(paper_ids)
        return np.where(pos >= 0, self.citing_counts[np.maximum(pos, 0)], 0)

    def mask_for(self, allowed_ids: Iterable[int], allowed: bool = True) -> np.ndarray:
        """Boolean document mask: True at the documents of ``allowed_ids`` only, or, with
        ``allowed=False``, everywhere but there (the draft's own citations left out). Built from
        the position table, not ``np.isin`` over every document (13-60 ms at ten million)."""
        mask = np.full(self.size, not allowed, dtype=bool)
        pos = self._positions_of(np.fromiter(allowed_ids, dtype=np.int64))
        mask[pos[pos >= 0]] = allowed
        return mask

    def _positions_of(self, paper_ids: Iterable[int] | np.ndarray) -> np.ndarray:
        """The document position of each paper id, -1 where not indexed (a changed paper: its
        current text's, in the delta)."""
        table = self._positions()
        ids = np.asarray(paper_ids, dtype=np.int64)
        inside = (ids >= 0) & (ids < table.shape[0])
        return np.where(inside, table[np.where(inside, ids, 0)], -1)


def top_k(scores: np.ndarray, k: int, ids: np.ndarray) -> list[tuple[int, float]]:
    """The k best (id, score) with score > 0, best first, ties broken by position: of the scores
    tied with the k-th best, the first ones in document order are kept."""
    k = min(k, scores.shape[0])
    if k <= 0:
        return []
    pool = _holding_top(scores, k)  # ascending positions
    held = scores[pool]
    # The k-th best as the k-th smallest of the negated scores: partitioning at n - k instead
    # took 12 ms on some ACM-CR queries (introselect degrades on the ties at zero), this 1 ms.
    kth = -np.partition(-held, k - 1)[k - 1]
    above = pool[held > kth]
    part = np.concatenate([above, pool[held == kth][: k - above.shape[0]]])
    order = part[np.lexsort((part, -scores[part]))]
    return [(int(ids[i]), float(scores[i])) for i in order if scores[i] > 0]


# Past four times this many documents (and for k up to a quarter of it), top_k first keeps the
# scores at least the k-th best of a strided sample of this many, and partitions only those: at
# ten million documents a partition of every score took 131 ms, the sample's way 5 ms.
TOP_K_SAMPLE = 1 << 16


def _holding_top(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions among which the k best scores are, all of them tied with the k-th included: the
    scores at least the k-th best of a sample. The sample's k scores are among them, so the k-th
    best of all is at least that value, and nothing below it can rank in or tie the top k."""
    n = scores.shape[0]
    step = n // TOP_K_SAMPLE
    if step < 4 or k * 4 > n // step:
        return np.arange(n)
    sample = scores[::step]
    floor = -np.partition(-sample, k - 1)[k - 1]
    return np.flatnonzero(scores >= floor)


# The compiled loop scores indexes of at least this many documents; smaller ones add impacts with
# numpy. Below it numpy's pass costs under ~5 ms a query view (2.0 ms at ACM-CR's 110k, against
# 1.1 compiled), and numba is not worth what it costs a process: 0.3 s to import and 123 MB of
# resident memory (46 MB its own, the rest LLVM's library pages). At ten million numpy took 261 ms
# a view, the loop 45 (bench/bench_bm25_topk.py). The same size as top_k's sampled path.
COMPILED_MIN_DOCS = 4 * TOP_K_SAMPLE


def numpy_add_impacts(
    acc: np.ndarray, postings: np.ndarray, impacts: np.ndarray, lo: int, hi: int, w: float
) -> None:
    """``acc[postings[lo:hi]] += w * impacts[lo:hi]`` with numpy, what the compiled loop computes
    bit for bit (``tests/indexer/test_bm25_kernels.py``)."""
    acc[postings[lo:hi]] += impacts[lo:hi] if w == 1.0 else w * impacts[lo:hi]


def _kernels() -> ModuleType:
    """The compiled loops (:mod:`citewise.indexer.bm25_kernels`), imported on the first search:
    numba takes ~0.3 s to import, which CLI commands that never search should not pay."""
    from . import bm25_kernels

    return bm25_kernels


def _by_term(entries: list[tuple[int, int, float]]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Sparse citing-field frequencies grouped by term id: (slots, frequencies) arrays."""
    grouped: dict[int, tuple[list[int], list[float]]] = {}
    for tid, slot, ctf in entries:
        slots, freqs = grouped.setdefault(tid, ([], []))
        slots.append(slot)
        freqs.append(ctf)
    return {
        tid: (np.asarray(slots, dtype=np.int64), np.asarray(freqs, dtype=np.float32))
        for tid, (slots, freqs) in grouped.items()
    }


def expanded_docs(
    store: Store, rows: Iterable[tuple], params: BM25Params, pids: list[int] | None = None
) -> Iterator[Doc]:
    """Paper rows with their citing text and number of citing papers appended (``citations.py``);
    rows as they are when the store knows no citations or the citing field is off."""
    found = citations.expansions(store, pids)
    if not found:
        yield from rows
        return
    none = citations.Expansion()
    for row in rows:
        exp = found.get(row[0], none)
        yield (*row, exp.text if params.w_citing else "", len(exp.citing))


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
