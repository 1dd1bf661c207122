"""Second stage where the dense list comes from a distilled student: the fused head re-scored with
the teacher's own paper vectors.

Why: a big store is embedded by the attention bag (``models/static_attention``), a student of the
bi-encoder (``models/dense``): it embeds 110k papers in about a minute where its teacher takes half
an hour on two cores, but its paper vectors only approximate the teacher's (agreement 0.915), and
the fused ranking pays for it at the top (ACM-CR dev R@10 0.507 against 0.534, MRR 0.387 against
0.402). The queries are already the teacher's, so for the few papers that can reach the top of the
list, the exact cosine costs one teacher embedding per paper, once: the same move as an int8 ANN
index re-scoring its first candidates with float32 vectors (``indexer/ann.py``), one level up.

How: of the first ``head`` fused candidates, those the student's dense list ranked get the
teacher's cosine with the query, and the dense ranks they held are dealt out again in the teacher's
order (:func:`with_teacher_ranks`); each one's fused score has the student's dense term replaced
(same RRF weight and ``k``), so the BM25 views and the citation prior keep exactly what they gave.
The rest of the list follows unchanged.
A paper's teacher vector is embedded the first time it is in a head and kept, in memory and
beside the store (:class:`TeacherVectors`, keyed by paper id and text, bounded); within
``budget_s`` seconds of embedding, so a cold cache on a slow machine cuts the work instead of the
editor's wait: papers left without a teacher vector keep their student's dense rank.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from citewise.indexer.records import PaperRecord
from citewise.indexer.vector_cache import VectorCache, text_key

from .biencoder_onnx import paper_text
from .focus import REST_WEIGHT, focused_vector
from .prefetch import DENSE
from .query import Candidate, ContextQuery

log = logging.getLogger(__name__)


class Teacher(Protocol):
    """The bi-encoder behind a student: it embeds queries (for both) and, here, papers."""

    dim: int  # the vectors' width (the cache beside the store reads its files by it)

    @property
    def model_hash(self) -> str: ...  # the vectors' identity (their cache is per teacher and store)

    def encode_papers(self, papers: Sequence[PaperRecord]) -> np.ndarray: ...

    def encode_query(self, q: ContextQuery) -> np.ndarray: ...


@dataclass
class RescoreSettings:
    """``max_candidates``: the head re-scored (the model manifest's ``rescore_head``); ``budget_s``:
    the most seconds spent embedding papers for one query (the reranker's name for both, so the
    editor's and ``citewise eval``'s ``--candidates``/``--budget`` set them alike)."""

    max_candidates: int = 100
    budget_s: float = 1.5
    weight: float = 2.0  # the dense list's RRF weight in the fusion being corrected
    rrf_k: float = 60.0
    # A placeholder's own clause against the rest of its sentence, as in the prefetch's dense
    # query (models/focus.py: focused_vector): the teacher re-scores what the student was asked.
    rest_weight: float = REST_WEIGHT


class TeacherVectors:
    """Teacher paper vectors by paper id and text, least recently used dropped past ``capacity``;
    with a ``cache`` (:class:`~citewise.indexer.vector_cache.VectorCache` beside the store), kept
    on disk too, so a restarted server re-scores the papers its drafts reached before without
    embedding them again.

    Why on disk (since 2026-11-28; memory only before): a fresh server's first reranked lists took
    0.6-1.2 s on two cores while every head paper was embedded, and editors restart servers often.
    Keys hold the paper's text, so an edited paper is embedded again; the files are append-only
    (a kill loses at most the last append) and the vectors of other weights are dropped; a folder
    that cannot be written leaves the cache in memory only. Past twice ``capacity`` entries the
    files keep only the newest ``capacity`` when next loaded."""

    def __init__(self, teacher: Teacher, capacity: int = 20_000, cache: VectorCache | None = None) -> None:
        self.teacher = teacher
        self.capacity = capacity
        self.cache = cache
        self._vecs: OrderedDict[int, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._loaded = cache is None
        self.embedded = 0  # papers embedded so far (tests and benches read it)

    @staticmethod
    def key(paper: PaperRecord, pid: int) -> int:
        return text_key(pid, paper_text(paper.title, paper.abstract))

    def _load(self) -> None:
        """The vectors kept on disk, once (under the lock)."""
        self._loaded = True
        cache = self.cache
        if cache is None:  # not reached: without a cache there is nothing to load (_loaded from the start)
            return
        try:
            keys, vecs = cache.read()
            if len(keys) > 2 * self.capacity:
                cache.keep_last(self.capacity)
        except OSError as exc:
            log.info("teacher vectors not read from %s: %s", cache.folder, exc)
            return
        for k, v in zip(keys[-self.capacity :].tolist(), vecs[-self.capacity :], strict=True):
            self._vecs[k] = v

    def get(
        self, papers: Mapping[int, PaperRecord], pids: Sequence[int], budget_s: float
    ) -> dict[int, np.ndarray]:
        """Vectors of ``pids`` (those in ``papers``): cached ones, then new ones embedded one by
        one while ``budget_s`` lasts (the first always is).

        Why one by one: the int8 model quantises its activations over the whole batch, so a
        paper's vector would depend on which papers shared its batch, and the same sentence
        could be ranked differently as the cache fills (one paper at a time costs ~25% of
        throughput on two cores, and a head is a few dozen papers)."""
        found: dict[int, np.ndarray] = {}
        todo: list[tuple[int, int]] = []
        with self._lock:
            if not self._loaded:
                self._load()
            for pid in pids:
                if pid not in papers:
                    continue
                key = self.key(papers[pid], pid)
                vec = self._vecs.get(key)
                if vec is None:
                    todo.append((pid, key))
                else:
                    self._vecs.move_to_end(key)
                    found[pid] = vec
        start = time.perf_counter()
        new: dict[int, np.ndarray] = {}
        for n, (pid, key) in enumerate(todo):
            if n and time.perf_counter() - start > budget_s:
                break
            found[pid] = new[key] = self.teacher.encode_papers([papers[pid]])[0]
        with self._lock:
            self._vecs.update(new)
            self.embedded += len(new)
            while len(self._vecs) > self.capacity:
                self._vecs.popitem(last=False)
        self._keep(new)
        return found

    def _keep(self, new: dict[int, np.ndarray]) -> None:
        """Append newly embedded vectors to the cache on disk, if there is one that can be written."""
        if self.cache is None or not new:
            return
        try:
            self.cache.append(list(new), np.stack(list(new.values())))
        except OSError as exc:
            log.info("teacher vectors kept in memory only (%s: %s)", self.cache.folder, exc)
            self.cache = None


def with_teacher_ranks(
    head: list[Candidate], cosine: Mapping[int, float], weight: float, rrf_k: float
) -> list[Candidate]:
    """``head`` re-fused with the dense ranks handed out in the teacher's order, best first.

    The head papers the student's dense list ranked, and that have a teacher ``cosine`` (paper id
    -> cosine), keep the same set of dense ranks, re-dealt by that cosine: the teacher's best gets
    the best of their ranks. Each one's dense term ``weight / (rrf_k + rank)`` is replaced
    accordingly; nothing else in its score changes. Why a permutation: a paper the student never
    ranked (BM25 found it) gets no dense rank now either. Ranking the whole head by the teacher
    instead handed every such paper a dense vote it never had, and lost R@50 0.042 on the ACL
    Anthology (docs/dense-prefetch.md). Pure: the candidates are copied, not changed."""
    held = [c for c in head if c.paper_id in cosine and c.ranks.get(DENSE)]
    slots = sorted(c.ranks[DENSE] for c in held)
    dealt = sorted(held, key=lambda c: (-cosine[c.paper_id], c.ranks[DENSE]))
    rank = {c.paper_id: r for c, r in zip(dealt, slots, strict=True)}
    out: list[Candidate] = []
    for c in head:
        new = Candidate(c.paper_id, c.score, dict(c.sources), dict(c.ranks))
        if c.paper_id in rank:
            new.score += weight / (rrf_k + rank[c.paper_id]) - weight / (rrf_k + c.ranks[DENSE])
            new.sources[DENSE] = float(cosine[c.paper_id])
            new.ranks[DENSE] = rank[c.paper_id]
        out.append(new)
    out.sort(key=lambda c: -c.score)  # stable: ties keep the prefetch's order
    return out


class TeacherRescore:
    """The :class:`~citewise.models.recommender.SecondStage` of a store embedded by a student."""

    name = "teacher-rescore"
    reads_citing = False  # the teacher reads what it was trained on: title and abstract

    def __init__(
        self, teacher: Teacher, settings: RescoreSettings | None = None, vectors: TeacherVectors | None = None
    ) -> None:
        self.teacher = teacher
        self.settings = settings or RescoreSettings()
        self.vectors = vectors or TeacherVectors(teacher)

    def rerank(
        self,
        query: ContextQuery,
        candidates: list[Candidate],
        papers: Mapping[int, PaperRecord],
        citing: Mapping[int, str] | None = None,
    ) -> list[Candidate]:
        """The first ``max_candidates`` re-fused with teacher cosines, the rest behind them.
        (``citing`` is the cross-encoder's: :attr:`reads_citing` spares the recommender finding it.)"""
        s = self.settings
        head = candidates[: s.max_candidates]
        if not head:
            return list(candidates)
        ranked = [c.paper_id for c in head if c.ranks.get(DENSE)]  # only these can move
        vecs = self.vectors.get(papers, ranked, s.budget_s)
        if not vecs:
            return list(candidates)
        q = focused_vector(self.teacher.encode_query, query, s.rest_weight)
        cosine = {pid: float(v @ q) for pid, v in vecs.items()}
        return with_teacher_ranks(head, cosine, s.weight, s.rrf_k) + list(candidates[s.max_candidates :])
