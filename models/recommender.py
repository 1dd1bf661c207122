"""The recommender core shared by the CLI, the evaluation and the language server.

Two stages, as in paper 004: a fast prefetch (BM25, fused with the dense model when a model and
its ANN index are present, or, where the store knows how its papers are cited, with the list of
papers by their citing texts' meaning, ``models/citing_vectors.py``, and the dense paper list only
for the sentences that list steps aside for) that answers at keystroke speed, and a pluggable
second stage, chosen per query by the lists its prefetch fused, that the server runs in the
background: the cross-encoder of ``models/reranker/`` when it ships with ``use_by_default`` (see
docs/reranker.md) and the prefetch is one it measured better over; where it steps aside and the
dense list is a distilled student's, the student's teacher re-scoring the head
(``models/teacher_rescore.py``); otherwise none. Without one, "reranked" means the full fusion of
every prefetch source (three BM25 views + the dense list), slower than the single fast view of the
first answer.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from citewise import deprecated
from citewise.indexer import bm25_files, citations
from citewise.indexer.bm25 import BM25Index, fts_or_query
from citewise.indexer.engine import LOCAL, parse_engine
from citewise.indexer.store import Store, StoredPaper

from . import citing_text, cocitation
from .citation_prior import cites_any, knows_citations
from .citing_vectors import CitingVectors, fuse_weight, open_for
from .focus import focus_query
from .library import Library
from .prefetch import CITED_AS, DENSE, DenseSource, Prefetcher, PrefetchSettings, rrf
from .query import Candidate, ContextQuery

log = logging.getLogger(__name__)

FAST_VIEW = ("local+title",)  # the best single BM25 view on ACM-CR dev (R@10 0.459 vs 0.411 local)
# The reranked list's time in ``recommend`` (prefetch + second stage): the second stage gets what
# the prefetch left of it, so that the list an editor waits for arrives within 1.5 s at p95 with
# the server's own work around it. Where the time went before: a teacher re-scoring a cold head
# embedded papers for its full 1.5 s after the prefetch (ACM-CR, load ~16: 1.8 s median, 2.1 s
# p95; docs/evaluation.md). A stage still reads the papers it has vectors or time for, best
# first; the rest keep their prefetch order.
RERANKED_WITHIN_S = 1.0
MIN_STAGE_S = 0.1  # a slow prefetch still leaves the stage its first paper or two


class SecondStage(Protocol):
    """A reranker: reorders (and may re-score) the prefetched candidates. A stage that ignores
    ``citing`` says so with ``reads_citing = False``, and the recommender does not look it up."""

    name: str

    def rerank(
        self,
        query: ContextQuery,
        candidates: list[Candidate],
        papers: dict[int, StoredPaper],
        citing: Mapping[int, str] | None = None,
    ) -> list[Candidate]: ...


@dataclass
class Recommendation:
    """A candidate with its paper, ready to show."""

    paper: StoredPaper
    candidate: Candidate

    def reason(self) -> str:
        """Why it was suggested: the sources that found it and at which rank."""
        parts = [f"{name} #{rank}" for name, rank in sorted(self.candidate.ranks.items(), key=lambda x: x[1])]
        return "found by " + ", ".join(parts) if parts else ""


def load_dense(store: Store) -> DenseSource | None:
    """The dense source for this store, when a model and an up-to-date ANN index exist."""
    try:
        from .dense_index import load_dense_source
    except ImportError:
        return None
    try:
        return load_dense_source(store)
    except Exception as exc:  # a missing or stale index must never break BM25 serving
        log.info("dense index not used: %s", exc)
        return None


_SHIPPED: list[SecondStage | None] = []  # the shipped reranker, loaded once per process
_TEACHER_VECTORS: dict[tuple[str, str], Any] = {}  # (teacher model hash, store) -> TeacherVectors
_TEACHER_LOCK = threading.Lock()


def teacher_folder(store: Store):
    """``<store>.teacher/``: the teacher's paper vectors kept beside a store it re-scores."""
    return store.path.with_name(store.path.name + ".teacher")


def shipped_second_stage() -> SecondStage | None:
    """The cross-encoder of ``models/reranker/`` when it ships and its manifest says it measured
    better on dev (``use_by_default``); loaded once, since the server rebuilds recommenders."""
    if not _SHIPPED:
        try:
            from .reranker import load_shipped

            _SHIPPED.append(load_shipped())
        except ImportError as exc:  # onnxruntime / tokenizers missing: BM25 only
            log.info("reranker not available: %s", exc)
            _SHIPPED.append(None)
    return _SHIPPED[0]


def within(stage: SecondStage, budget_s: float) -> SecondStage:
    """``stage`` with at most ``budget_s`` seconds of its own work per query: a shallow copy with
    its settings' ``budget_s`` lowered (the model, the teacher's vectors and every other setting
    shared), so the stage other callers hold keeps its own budget (``citewise eval --budget``).
    A stage without a time budget is returned as it is."""
    settings = getattr(stage, "settings", None)
    if settings is None or not hasattr(settings, "budget_s") or settings.budget_s <= budget_s:
        return stage
    timed: Any = copy.copy(stage)  # a stage with settings (found above), which SecondStage does not name
    timed.settings = dataclasses.replace(settings, budget_s=budget_s)
    return timed


class Recommender:
    """Ranks a store's papers for context queries. Thread-safe for concurrent reads."""

    def __init__(
        self,
        store: Store,
        *,
        prefetch_mode: str = "auto",
        build_missing: bool = True,
        use_dense: bool = True,
        second_stage: SecondStage | None = None,
        use_reranker: bool = True,
        engine: str = LOCAL,
    ) -> None:
        self.store = store
        self.library = Library(store)  # what the front ends look papers up in
        self.prefetch_mode = prefetch_mode
        self._lock = threading.Lock()
        # "local" (the BM25 index beside the store), or a Milvus collection: indexer/engine.py.
        self.engine = parse_engine(engine)
        if not self.engine.is_local:
            from .engines import open_remote

            self.bm25, self.dense = open_remote(store, self.engine, use_dense)
        else:
            self.bm25 = (
                bm25_files.load_or_build(store)
                if build_missing
                else bm25_files.load_index(bm25_files.index_folder(store))
            )
            self.dense = load_dense(store) if use_dense else None
        self.citing = self._load_citing() if use_dense else None
        # Without an explicit second stage, the shipped reranker when there is one that earned it.
        self._explicit_stage = second_stage is not None or not use_reranker
        self._stage = second_stage if self._explicit_stage else shipped_second_stage()
        self._teacher: Any = None  # the teacher re-scoring stage, made when first needed

    @property
    def second_stage(self) -> SecondStage | None:
        """The second stage for the store's prefetch mode (:meth:`stage_for_mode`); a query's own
        is :meth:`stage_for` its candidates."""
        return self.stage_for_mode(self.mode())

    def stage_for(self, candidates: list[Candidate]) -> SecondStage | None:
        """The second stage for one query's prefetched candidates: as for a BM25 prefetch where
        the hybrid prefetch left the dense paper list out for this query (the ``cited-as`` list
        spoke instead, :meth:`Prefetcher.source_lists`): there the cross-encoder, which reads
        how each candidate is cited, reorders the head, and the teacher, which re-scores a dense
        list's ranks, has none to re-score."""
        mode = self.mode()
        if mode == "hybrid" and not any(DENSE in c.ranks for c in candidates):
            mode = "bm25"
        return self.stage_for_mode(mode)

    def stage_for_mode(self, mode: str) -> SecondStage | None:
        """The second stage over a ``mode`` prefetch. The shipped reranker steps aside where its
        manifest says it measured no better than the prefetch it would reorder (``"skip_modes"``:
        on ACM-CR dev it lowered the dense-fused prefetch's MRR 0.402 -> 0.381, while it lifts the
        BM25 prefetch's 0.343 -> 0.364), and there, when the dense list is a student's, the
        teacher re-scores the head instead (:meth:`_teacher_stage`); an explicitly given stage is
        always used."""
        stage = self._stage
        if self._explicit_stage:
            return stage
        manifest = getattr(stage, "manifest", None) or {}
        if stage is not None and mode not in manifest.get("skip_modes", ()):
            return stage
        return self._teacher_stage() if mode == "hybrid" else None

    def _teacher_stage(self) -> SecondStage | None:
        """Where the dense list fused in comes from a student of the bi-encoder (the attention bag
        a big store is embedded with), its head re-scored with the teacher's own paper vectors
        (:mod:`.teacher_rescore`) when the model's manifest asks for it (``rescore_head``): on
        ACM-CR dev R@10 0.507 -> 0.531, MRR 0.387 -> 0.400 (docs/dense-prefetch.md). The
        teacher's vectors are kept per process, so they outlive the recommenders the server
        rebuilds, and on disk beside the store (``<store>.teacher/``), so they outlive a restart."""
        encoder = getattr(self.dense, "encoder", None)
        head = int((getattr(encoder, "manifest", None) or {}).get("rescore_head", 0) or 0)
        teacher = getattr(encoder, "teacher", None)
        if head <= 0 or teacher is None:
            return None
        if self._teacher is None or self._teacher.teacher is not teacher:
            from citewise.indexer.vector_cache import VectorCache

            from .teacher_rescore import RescoreSettings, TeacherRescore, TeacherVectors

            with _TEACHER_LOCK:
                where = (teacher.model_hash, str(self.store.path))
                vectors = _TEACHER_VECTORS.get(where)
                if vectors is None:
                    cache = VectorCache(
                        teacher_folder(self.store), "papers", int(teacher.dim), teacher.model_hash
                    )
                    vectors = _TEACHER_VECTORS[where] = TeacherVectors(teacher, cache=cache)
            fusion = self.prefetch_settings()  # the fusion whose dense term the stage replaces
            settings = RescoreSettings(
                max_candidates=head,
                weight=fusion.weights.get(DENSE, 1.0),
                rrf_k=fusion.rrf_k,
                rest_weight=fusion.rest_weight,
            )
            self._teacher = TeacherRescore(teacher, settings, vectors)
        return self._teacher

    def refresh(self) -> bool:
        """Reload indexes when the store changed (another process imported). True if reloaded."""
        if not self.engine.is_local:  # a remote collection is served as it is: nothing to reload
            return False
        if self.bm25 is not None and self.bm25.generation == self.store.generation:
            return False
        bm25 = bm25_files.load_or_build(self.store)
        dense = load_dense(self.store)
        with self._lock:
            self.bm25, self.dense = bm25, dense
            self.citing = self._load_citing()
        return True

    def reload_citing(self) -> None:
        """Read the citing vectors again (the server's reindex has just rebuilt them)."""
        citing = self._load_citing()
        with self._lock:
            self.citing = citing

    def _load_citing(self) -> CitingVectors | None:
        """The papers' citing-text vectors (:mod:`.citing_vectors`), where the store knows how its
        papers are cited (:func:`knows_citations`, as BM25's reading of the citing sentences) and
        ``citewise index`` embedded them; None elsewhere. Local stores only."""
        if not self.engine.is_local or not knows_citations(self.bm25):
            return None
        return open_for(self.store)

    def mode(self) -> str:
        """The prefetch used: ``auto`` fuses the dense list in only when its manifest says the fusion
        measured better than BM25 alone on ACM-CR dev (``fuse_by_default``); a model that does
        not help must not cost latency or quality. Nor where the store knows how its papers are
        cited (:func:`knows_citations`): BM25 then reads the citing sentences, which the dense
        models never see, and on the ACL dev split fusing either dense list in lowered R@10 and
        MRR (static 0.631/0.364 -> 0.573/0.328 against BM25 + reranker; docs/dense-prefetch.md),
        unless the store has its ``cited-as`` list: then the prefetch fuses the dense paper list
        only for the sentences that list steps aside for (:meth:`Prefetcher.source_lists`), the
        sentences of a field the store's citation files do not cover."""
        if self.prefetch_mode != "auto":  # "hatten", the old name of "dense", still works (once noted)
            return deprecated.prefetch_mode(self.prefetch_mode, "prefetch mode")
        manifest = getattr(getattr(self.dense, "encoder", None), "manifest", None) or {}
        if (
            self.dense is not None
            and manifest.get("fuse_by_default", False)
            and (self.citing is not None or not knows_citations(self.bm25))
        ):
            return "hybrid"
        return "bm25"

    def prefetch_settings(self, fast: bool = False) -> PrefetchSettings:
        """How the prefetch gathers and fuses: the single fast view for the keystroke, else every
        view, with the dense list weighted as its model's manifest says."""
        settings = PrefetchSettings(bm25_views=FAST_VIEW, prf_docs=0) if fast else PrefetchSettings()
        manifest = getattr(getattr(self.dense, "encoder", None), "manifest", None) or {}
        if "fuse_weight" in manifest:  # the dense list's RRF weight, chosen on ACM-CR dev with the model
            settings.weights[DENSE] = float(manifest["fuse_weight"])
        if self.citing is not None and not fast:
            settings.weights[CITED_AS] = fuse_weight(self.citing.encoder)
        return settings

    def prefetcher(self, excluded: Iterable[int] = (), fast: bool = False) -> Prefetcher:
        """The prefetch over this store's sources; the keystroke's (``fast``) reads one BM25 view
        and nothing else."""
        return Prefetcher(
            self.bm25,
            self.dense,
            self.prefetch_settings(fast),
            excluded,
            feedback_texts=self.feedback_texts,
            citing=None if fast else self.citing,
        )

    def feedback_texts(self, ids: list[int]) -> list[str]:
        """Texts of papers for pseudo-relevance feedback (title twice: it is the densest field)."""
        papers = self.store.get_many(ids)
        return [f"{p.title} {p.title} {p.abstract} {p.keywords}" for p in (papers.get(i) for i in ids) if p]

    def prefetch(
        self, query: ContextQuery, k: int = 200, *, excluded: Iterable[int] = (), fast: bool = False
    ) -> list[Candidate]:
        """First stage. ``fast`` uses the single best BM25 view (the keystroke path)."""
        mode = "bm25" if fast else self.mode()
        return self.prefetcher(excluded, fast).candidates(query, k, mode)

    def recommend(
        self,
        query: ContextQuery,
        k: int = 10,
        *,
        candidates: int = 200,
        excluded: Iterable[int] = (),
        rerank: bool = True,
        cited: Iterable[int] = (),
    ) -> list[Recommendation]:
        """Both stages: full prefetch, then the second stage when there is one, within what the
        prefetch left of ``RERANKED_WITHIN_S`` (:func:`within`). ``cited``: the draft's citations
        (store ids), whose co-cited papers move up among the candidates (:mod:`.cocitation`)."""
        start = time.perf_counter()
        cands = self.prefetch(query, max(k, candidates), excluded=excluded)
        cands = cocitation.with_cocitation(cands, self.store, cited)
        papers = self.store.get_many([c.paper_id for c in cands])
        stage = self.stage_for(cands) if rerank else None
        if stage is not None:
            left = max(RERANKED_WITHIN_S - (time.perf_counter() - start), MIN_STAGE_S)
            cands = self.rerank(query, cands, papers, within(stage, left))
        return self.with_papers(cands[:k], papers)

    def rerank(
        self,
        query: ContextQuery,
        candidates: list[Candidate],
        papers: dict[int, StoredPaper],
        stage: SecondStage | None = None,
    ) -> list[Candidate]:
        """The second stage (``stage``, or this recommender's) over ``candidates``, reading beside
        each paper how the store's papers cite it (:meth:`citing_snippets`)."""
        stage = stage or self.second_stage
        if stage is None:
            raise RuntimeError("no second stage to rerank with (this recommender has none; pass stage)")
        if not getattr(stage, "reads_citing", True):  # the teacher reads title and abstract only
            return stage.rerank(query, candidates, papers)
        head = candidates[: getattr(getattr(stage, "settings", None), "max_candidates", len(candidates))]
        return stage.rerank(
            query, candidates, papers, self.citing_snippets(query, [c.paper_id for c in head])
        )

    def warm_up(self) -> None:
        """Make the local index's scoring loop ready (:meth:`BM25Index.warm_up`) before the first
        keystroke needs it; a remote engine has none."""
        if isinstance(self.bm25, BM25Index):
            self.bm25.warm_up()

    def citing_snippets(self, query: ContextQuery, pids: list[int]) -> dict[int, str]:
        """Paper id -> the citing sentence or title most like the query's sentence, for the papers
        the store knows citers of (``models/citing_text.py``); {} where it knows none."""
        if not pids or not cites_any(self.bm25):
            return {}
        found = citations.expansions(self.store, pids)
        texts = {pid: exp.texts for pid, exp in found.items()}
        # The placeholder's own clause: its citers' words, not those of its neighbours' (focus.py).
        local = focus_query(query).local
        return citing_text.snippets(local, texts, self.bm25.tokenizer, self.bm25.idf_of)

    def with_papers(
        self, cands: list[Candidate], papers: dict[int, StoredPaper] | None = None
    ) -> list[Recommendation]:
        """Candidates with their stored papers, in order (ids the store no longer has are dropped)."""
        if papers is None:
            papers = self.store.get_many([c.paper_id for c in cands])
        return [Recommendation(papers[c.paper_id], c) for c in cands if c.paper_id in papers]

    def search(self, text: str, k: int = 10) -> list[Recommendation]:
        """Free-text search (``citewise search``): context ranking fused with an author/title lookup.

        A user typing "vaswani attention" wants the paper by author and title words, which the
        context ranker (title, abstract, keywords) does not index; FTS5 over title and authors does.
        """
        query = ContextQuery(text)
        lists = self.prefetcher().source_lists(query, self.mode())
        match = fts_or_query(text, max_terms=16)
        if match:
            lists["title/author"] = self.store.fts_search(match, 200, weights=(2.0, 0.0, 4.0))
        cands = rrf(lists)[:k] if len(lists) > 1 else self.prefetch(query, k)
        return self.with_papers(cands)
