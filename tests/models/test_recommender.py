"""The recommender core: when the dense list is fused in, and what each candidate says about its sources."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np

from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store
from citewise.models.query import ContextQuery
from citewise.models.recommender import Recommender


class FixedDense:
    """A dense source at the true boundary (the ONNX model): returns a fixed ranking. ``teacher``:
    the model is a student whose fused head its teacher re-scores (``rescore_head``)."""

    def __init__(self, ids: list[int], fuse: bool, teacher: object | None = None) -> None:
        self.ids = ids
        manifest = {"fuse_by_default": fuse} | ({"rescore_head": 5} if teacher is not None else {})
        self.encoder = SimpleNamespace(manifest=manifest, teacher=teacher)

    def search_query(self, query: ContextQuery, k: int) -> list[tuple[int, float]]:
        return [(pid, 1.0 - i / 100) for i, pid in enumerate(self.ids[:k])]


def make_store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "s.sqlite")
    recs = [
        PaperRecord(
            title="Sparse retrieval with BM25 term weighting", abstract="Probabilistic relevance.", key="bm25"
        ),
        PaperRecord(
            title="Dense passage retrieval with dual encoders", abstract="Embeddings for QA.", key="dpr"
        ),
        PaperRecord(title="Graph neural networks for molecules", abstract="Chemistry.", key="gnn"),
    ]
    store.import_source("lib.jsonl", iter(recs), fmt="jsonl")
    return store


def test_auto_mode_fuses_dense_only_when_its_manifest_says_it_measured_better(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    rec = Recommender(store)
    assert rec.dense is None and rec.mode() == "bm25"
    gnn = store.find(key="gnn").id
    rec.dense = FixedDense([gnn], fuse=False)
    assert rec.mode() == "bm25"
    rec.dense = FixedDense([gnn], fuse=True)
    assert rec.mode() == "hybrid"
    results = rec.recommend(ContextQuery("term weighting for sparse retrieval"), k=3)
    by_key = {r.paper.key: r for r in results}
    assert "dense" in by_key["gnn"].candidate.sources, "the dense source's candidates are fused in"
    assert results[0].paper.key == "bm25"
    assert "bm25:local" in results[0].reason()


def test_excluded_papers_never_come_back(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    rec = Recommender(store)
    dpr = store.find(key="dpr").id
    rec.dense = FixedDense([dpr], fuse=True)
    results = rec.recommend(ContextQuery("dense retrieval"), k=3, excluded=[dpr])
    assert dpr not in [r.paper.id for r in results]


def test_auto_mode_leaves_the_dense_list_out_where_the_store_knows_citations(tmp_path: Path) -> None:
    """A store with citing sentences but no ``cited-as`` list (one indexed before it, or citing
    more papers than it holds) ranks by BM25 over them (and the second stage), not fused with a
    dense list that never reads them."""
    store = make_store(tmp_path)
    edges = tmp_path / "edges.tsv"
    edges.write_text("citing\tcited\nbm25\tdpr\n", encoding="utf-8")
    rec = Recommender(store)
    rec.dense = FixedDense([store.find(key="gnn").id], fuse=True)
    assert rec.mode() == "hybrid"
    from citewise.indexer.citations import import_citation_file

    assert import_citation_file(store, edges) == 1
    assert rec.refresh()
    rec.dense = FixedDense([store.find(key="gnn").id], fuse=True)
    assert rec.mode() == "bm25"


def test_where_the_cited_as_list_steps_aside_the_dense_paper_list_answers_and_its_stage_follows(
    tmp_path: Path,
) -> None:
    """On a store with its ``cited-as`` list, ``auto`` is hybrid, and each query gets one list by
    meaning: the ``cited-as`` list where its BM25 neighbours include cited papers at the store's
    rate (the cross-encoder, which reads how they are cited, then reorders the head), else the
    dense paper list (and its teacher re-scores the head, as on a store without citations)."""
    from citewise.indexer.citations import import_citation_file
    from citewise.models.citing_vectors import CitingVectors
    from citewise.models.prefetch import CITED_AS, DENSE

    store = make_store(tmp_path)
    edges = tmp_path / "edges.tsv"
    edges.write_text("citing\tcited\nbm25\tdpr\n", encoding="utf-8")
    assert import_citation_file(store, edges) == 1
    rec = Recommender(store)
    dpr, sparse = store.find(key="dpr").id, store.find(key="bm25").id
    rec.dense = FixedDense([sparse], fuse=True, teacher=SimpleNamespace(model_hash="t", dim=2))
    assert rec.citing is None and rec.mode() == "bm25"  # no cited-as list: BM25 reads the citations
    query_side = SimpleNamespace(manifest={"fuse_weight": 2.0}, encode_query=lambda q: np.array([1.0, 0.0]))
    rec.citing = CitingVectors(np.array([dpr]), np.array([[1.0, 0.0]], dtype=np.float32), query_side)
    assert rec.mode() == "hybrid"
    covered = rec.prefetch(ContextQuery("dense passage retrieval with dual encoders"), 3)
    assert covered[0].paper_id == dpr and covered[0].ranks[CITED_AS] == 1
    assert not any(DENSE in c.ranks for c in covered)
    assert rec.stage_for(covered) is rec.stage_for_mode("bm25") is not None  # the cross-encoder
    other = rec.prefetch(ContextQuery("graph networks for chemistry"), 3)  # neighbours: none cited
    assert not any(CITED_AS in c.ranks for c in other)
    assert [c.paper_id for c in other if DENSE in c.ranks] == [sparse]
    assert rec.stage_for(other).name == "teacher-rescore"
    assert all(DENSE not in c.ranks for c in rec.prefetch(ContextQuery("graph chemistry"), 3, fast=True))


def depths_asked(rec: Recommender) -> list[int]:
    """The depth of every BM25 search ``rec`` makes from now on (the index still answers)."""
    asked: list[int] = []
    search = rec.bm25.search

    def spy(text, k=10, mask=None, dedupe=False):
        asked.append(k)
        return search(text, k, mask=mask, dedupe=dedupe)

    rec.bm25.search = spy
    return asked


def test_keystroke_path_ranks_only_as_deep_as_it_answers(tmp_path: Path) -> None:
    """One view, no feedback, no prior: each BM25 search is asked for the k shown, not 1,000 deep,
    and the answer is the deep one's head."""
    store = make_store(tmp_path)
    rec = Recommender(store)
    asked = depths_asked(rec)
    q = ContextQuery("retrieval with term weighting and dual encoders")
    fast = rec.prefetch(q, 2, fast=True)
    assert asked == [2]
    deep = rec.prefetcher(fast=True).candidates(q, 1000, "bm25")
    assert [c.paper_id for c in fast] == [c.paper_id for c in deep[:2]] and asked[-1] == 1000


def test_keystroke_path_with_the_prior_ranks_as_deep_as_a_paper_can_be_lifted(tmp_path: Path) -> None:
    """With citation counts the prior reorders the view's list, so the view ranks as deep as the
    prior's largest vote can lift a paper into the top k (``reach_depth``), not 1,000 deep."""
    from citewise.indexer.citations import import_citation_file
    from citewise.models.citation_prior import reach_depth

    store = make_store(tmp_path)
    edges = tmp_path / "edges.tsv"
    edges.write_text("citing\tcited\nbm25\tdpr\ngnn\tdpr\n", encoding="utf-8")
    import_citation_file(store, edges)
    rec = Recommender(store)
    assert rec.bm25.citing_counts.any()
    asked = depths_asked(rec)
    rec.prefetch(ContextQuery("retrieval with term weighting and dual encoders"), 20, fast=True)
    assert asked == [reach_depth(20, 1.0, 0.5)] and 20 < asked[0] < 1000
    rec.prefetch(ContextQuery("retrieval with term weighting and dual encoders"), 100, fast=True)
    assert asked[-1] == 1000  # no bound at k = 100: the full depth
