"""The head of a student-fused list re-scored with the teacher's paper vectors
(models/teacher_rescore.py): the re-fusion itself (pure), the teacher's vectors kept per paper, and
the recommender choosing the stage on a store the attention bag embedded, on real ACM-CR entries."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from citewise.models.prefetch import DENSE, rrf
from citewise.models.query import ContextQuery
from citewise.models.teacher_rescore import TeacherVectors, with_teacher_ranks
from tests.conftest import ACM_DL, require

TRIR = "journals/trir.bib"  # 31 real papers (ACM Transactions on IR)


def _lists() -> tuple[dict, dict, dict[int, float]]:
    """Two BM25 views, the student's dense list, and a teacher that disagrees with the student."""
    bm25_a = [(i, 10.0 - i) for i in (1, 2, 3, 4, 5, 6)]
    bm25_b = [(i, 9.0 - i) for i in (3, 1, 7, 2, 8)]
    student = [(i, 0.9 - 0.01 * r) for r, i in enumerate((7, 2, 9, 1, 4, 5, 3, 6, 8))]
    teacher = {1: 0.8, 2: 0.3, 3: 0.7, 4: 0.1, 5: 0.5, 6: 0.2, 7: 0.6, 8: 0.9, 9: 0.4}
    return {"bm25:a": bm25_a, "bm25:b": bm25_b}, {DENSE: student}, teacher


def test_a_head_the_student_ranked_whole_is_fused_as_if_the_teacher_had_ranked_it() -> None:
    bm25, student, teacher = _lists()
    weights = {DENSE: 2.0}
    fused = rrf({**bm25, **student}, 60.0, weights)
    by_teacher = sorted(teacher, key=lambda p: -teacher[p])
    want = rrf({**bm25, DENSE: [(p, teacher[p]) for p in by_teacher]}, 60.0, weights)
    got = with_teacher_ranks(fused, teacher, 2.0, 60.0)
    assert [c.paper_id for c in got] == [c.paper_id for c in want]
    assert [c.paper_id for c in got] != [c.paper_id for c in fused]  # the teacher changed the order
    for g, w in zip(got, want, strict=True):
        assert g.score == pytest.approx(w.score)
        assert g.ranks == w.ranks and g.sources[DENSE] == teacher[g.paper_id]


def test_the_teacher_deals_out_only_the_ranks_the_student_gave() -> None:
    """A paper BM25 alone found gets no dense rank; the others' ranks are re-dealt, not renumbered."""
    bm25 = {"bm25:a": [(i, 10.0 - i) for i in (1, 2, 3, 4, 5, 10)]}
    student = {DENSE: [(i, 0.9 - 0.01 * r) for r, i in enumerate((20, 2, 21, 22, 5, 23, 24, 25, 1))]}
    fused = rrf({**bm25, **student}, 60.0, {DENSE: 2.0})
    head = [c for c in fused if c.paper_id < 20]  # 1, 2, 3, 4, 5, 10: dense ranks 9, 2, -, -, 5, -
    teacher = {1: 0.9, 2: 0.1, 3: 0.99, 4: 0.5, 5: 0.6, 10: 0.95}
    got = {c.paper_id: c for c in with_teacher_ranks(head, teacher, 2.0, 60.0)}
    assert {p: got[p].ranks.get(DENSE) for p in got} == {1: 2, 2: 9, 3: None, 4: None, 5: 5, 10: None}
    was = {c.paper_id: c.score for c in head}
    assert got[1].score == pytest.approx(was[1] - 2 / 69 + 2 / 62)
    assert got[2].score == pytest.approx(was[2] - 2 / 62 + 2 / 69)
    for p in (3, 4, 5, 10):
        assert got[p].score == pytest.approx(was[p])


def test_papers_without_a_teacher_vector_keep_their_score_and_nothing_is_changed_in_place() -> None:
    bm25, student, teacher = _lists()
    fused = rrf({**bm25, **student}, 60.0, {DENSE: 2.0})
    before = [(c.paper_id, c.score, dict(c.ranks)) for c in fused]
    partial = {p: teacher[p] for p in (8, 4)}  # the student ranked them 9th and 5th
    got = {c.paper_id: c for c in with_teacher_ranks(fused, partial, 2.0, 60.0)}
    assert [(c.paper_id, c.score, c.ranks) for c in fused] == before
    for c in fused:
        if c.paper_id not in partial:
            assert got[c.paper_id].score == c.score and got[c.paper_id].ranks == c.ranks
    assert got[8].ranks[DENSE] == 5 and got[4].ranks[DENSE] == 9


@pytest.fixture(scope="module")
def teacher():
    from citewise.models import dense_index

    folder = dense_index.default_model_dir().parent / "dense"
    if not (folder / "manifest.json").exists():
        pytest.skip("the shipped bi-encoder (models/dense) is not installed")
    return dense_index.make_encoder(folder)


@pytest.fixture(scope="module")
def papers():
    from citewise.indexer.bibtex import iter_bibtex
    from citewise.indexer.records import PaperRecord

    records = [r for r in iter_bibtex(require(ACM_DL / TRIR)) if isinstance(r, PaperRecord)]
    return {i: r for i, r in enumerate(records, start=1)}


def test_teacher_vectors_are_the_teachers_embedded_once_per_paper_text(teacher, papers) -> None:
    from citewise.indexer.records import PaperRecord

    vectors = TeacherVectors(teacher, capacity=1000)
    pids = list(papers)[:10]
    got = vectors.get(papers, pids, budget_s=60.0)
    # one paper at a time: the int8 model quantises over a batch, so each vector is its own
    want = np.stack([teacher.encode_papers([papers[p]])[0] for p in pids])
    assert np.array_equal(np.stack([got[p] for p in pids]), want)
    assert vectors.embedded == 10
    vectors.get(papers, pids, budget_s=60.0)
    assert vectors.embedded == 10  # kept: nothing embedded again
    edited = dict(papers)
    edited[pids[0]] = PaperRecord(title=papers[pids[0]].title + " revisited", abstract="")
    again = vectors.get(edited, pids[:1], budget_s=60.0)
    assert vectors.embedded == 11  # a changed paper is embedded anew
    assert float(again[pids[0]] @ got[pids[0]]) < 0.99
    assert vectors.get(papers, [99_999], budget_s=60.0) == {}  # unknown ids are skipped


def test_teacher_vectors_keep_to_their_capacity_and_budget(teacher, papers) -> None:
    vectors = TeacherVectors(teacher, capacity=5)
    pids = list(papers)[:12]
    got = vectors.get(papers, pids, budget_s=0.0)
    assert len(got) == 1 and vectors.embedded == 1  # out of time after the first paper
    vectors.get(papers, pids, budget_s=60.0)
    assert vectors.embedded == 12 and len(vectors._vecs) == 5  # the least recently used dropped


def _store(tmp_path: Path, monkeypatch, model: str | None):
    from citewise.indexer.importer import import_sources
    from citewise.indexer.store import Store
    from citewise.models import dense_index

    if model:
        monkeypatch.setenv("CITEWISE_DENSE_MODEL", model)
    else:
        monkeypatch.delenv("CITEWISE_DENSE_MODEL", raising=False)
    monkeypatch.delenv("CITEWISE_HATTEN_MODEL", raising=False)
    bib = tmp_path / "trir.bib"
    shutil.copy(require(ACM_DL / TRIR), bib)
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [bib])
    assert dense_index.build_index(store)["valid"] == 31
    return store


QUERY = ContextQuery(
    "Learning to rank methods train a ranking function from relevance judgments [CIT].",
    citing_title="Neural ranking models for ad hoc retrieval",
)


def test_a_store_embedded_by_the_bag_has_its_fused_head_rescored_by_the_teacher(
    tmp_path: Path, monkeypatch, teacher, capsys
) -> None:
    from citewise.models.recommender import Recommender
    from citewise.models.teacher_rescore import TeacherRescore

    store = _store(tmp_path, monkeypatch, "static_attention")
    rec = Recommender(store)
    assert rec.mode() == "hybrid"
    stage = rec.second_stage
    assert isinstance(stage, TeacherRescore) and stage.settings.max_candidates == 100
    assert stage.settings.weight == 2.0 and stage.teacher.model_hash == teacher.model_hash
    assert Recommender(store).second_stage.vectors is stage.vectors  # vectors outlive a recommender
    from citewise.cli import main

    assert main(["info", "--store", str(store.path)]) == 0  # a user can see it
    assert "its top 100 re-scored by the bi-encoder" in capsys.readouterr().out

    cands = rec.prefetch(QUERY, 200)
    papers = store.get_many([c.paper_id for c in cands])
    ranked = [c.paper_id for c in cands if c.ranks.get(DENSE)]
    vecs = np.stack([teacher.encode_papers([papers[p]])[0] for p in ranked])  # one by one, as the stage
    cosine = dict(zip(ranked, vecs @ teacher.encode_query(QUERY), strict=True))
    want = [c.paper_id for c in with_teacher_ranks(cands, cosine, 2.0, 60.0)]
    # Every head paper's vector first: on a busy machine the stage's time budget (recommend's,
    # tested on its own) would leave some with their student's rank.
    stage.vectors.get(papers, ranked, budget_s=60.0)
    got = [r.candidate.paper_id for r in rec.recommend(QUERY, k=31)]
    assert got == want
    assert got != [c.paper_id for c in cands]  # the teacher moved something on these 31 papers
    assert [r.candidate.paper_id for r in rec.recommend(QUERY, k=31, rerank=False)] == [
        c.paper_id for c in cands
    ]
    assert Recommender(store, use_reranker=False).second_stage is None
    # A restarted server (a new process: no vectors in memory) reads them beside the store.
    from citewise.models import recommender as recommender_mod

    assert (recommender_mod.teacher_folder(store) / "papers.u64").stat().st_size == 8 * len(ranked)
    monkeypatch.setattr(recommender_mod, "_TEACHER_VECTORS", {})
    restarted = Recommender(store)
    assert [r.candidate.paper_id for r in restarted.recommend(QUERY, k=31)] == want
    assert restarted.second_stage.vectors.embedded == 0


def test_teacher_vectors_outlive_a_restart_and_drop_what_they_cannot_trust(
    tmp_path: Path, teacher, papers
) -> None:
    from citewise.indexer.vector_cache import VectorCache

    def cache(model_hash: str = teacher.model_hash) -> VectorCache:
        return VectorCache(tmp_path / "s.teacher", "papers", teacher.dim, model_hash)

    pids = list(papers)[:10]
    first = TeacherVectors(teacher, cache=cache())
    got = first.get(papers, pids, budget_s=60.0)
    again = TeacherVectors(teacher, cache=cache())  # a new process
    kept = again.get(papers, pids, budget_s=60.0)
    assert again.embedded == 0 and all(np.array_equal(kept[p], got[p]) for p in pids)
    with open(tmp_path / "s.teacher" / "papers.f32", "ab") as fh:  # a kill mid-append
        fh.write(b"\1" * 100)
    torn = TeacherVectors(teacher, cache=cache())
    torn.get(papers, pids, budget_s=60.0)
    assert torn.embedded == 0
    other = TeacherVectors(teacher, cache=cache("0" * 16))  # other weights: nothing of theirs is used
    other.get(papers, pids[:2], budget_s=60.0)
    assert other.embedded == 2 and len(cache("0" * 16).read()[0]) == 2
    other.get(papers, pids[2:3], budget_s=60.0)  # 3 on disk: over twice a capacity of 1
    small = TeacherVectors(teacher, capacity=1, cache=cache("0" * 16))
    small.get(papers, pids[2:3], budget_s=60.0)
    assert small.embedded == 0 and len(cache("0" * 16).read()[0]) == 1  # loading kept the newest
    (tmp_path / "file").write_text("not a folder")
    nowhere = TeacherVectors(teacher, cache=VectorCache(tmp_path / "file", "papers", teacher.dim, "h"))
    assert len(nowhere.get(papers, pids[:2], budget_s=60.0)) == 2 and nowhere.cache is None  # memory only


def test_a_store_embedded_by_the_bi_encoder_itself_needs_no_rescoring(tmp_path: Path, monkeypatch) -> None:
    from citewise.models import dense_index
    from citewise.models.recommender import Recommender

    if not (dense_index.default_model_dir().parent / "dense" / "manifest.json").exists():
        pytest.skip("the shipped bi-encoder (models/dense) is not installed")
    store = _store(tmp_path, monkeypatch, None)  # 31 papers: the bi-encoder embeds them (the size rule)
    rec = Recommender(store)
    assert rec.mode() == "hybrid" and rec.second_stage is None
    bm25 = Recommender(store, prefetch_mode="bm25")
    assert bm25.second_stage is None or type(bm25.second_stage).__name__ == "CrossEncoderReranker"


def test_eval_names_the_teacher_stage_and_no_rerank_turns_it_off(tmp_path: Path, monkeypatch, capsys) -> None:
    """``citewise eval`` on a store the bag embedded ranks through the teacher stage, as the editor
    does, and says so in the row's name; ``--no-rerank`` is the fused prefetch alone."""
    from citewise.cli import main
    from tests.evaluation.test_eval_plot import _eval_args

    monkeypatch.setenv("CITEWISE_DENSE_MODEL", "static_attention")
    args = _eval_args(tmp_path)
    assert main(["index", str(tmp_path / "lib.bib"), "--store", str(tmp_path / "s.sqlite"), "-q"]) == 0
    assert main([*args, "--json", str(tmp_path / "t.json"), "-q"]) == 0
    assert "hybrid + teacher@100, sentence" in capsys.readouterr().out
    assert main([*args, "--no-rerank", "--json", str(tmp_path / "p.json"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "hybrid, sentence" in out and "teacher@" not in out
