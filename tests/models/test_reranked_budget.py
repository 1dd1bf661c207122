"""The reranked list within its time: ``Recommender.recommend`` gives the second stage what the
prefetch left of ``RERANKED_WITHIN_S``, on a copy, so the stage other callers hold (``citewise
eval --budget``) keeps its own budget."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store
from citewise.models import recommender as R
from citewise.models.query import ContextQuery


@dataclass
class Budgeted:
    budget_s: float = 60.0
    max_candidates: int = 10


class RecordingStage:
    """A second stage that keeps the original order and notes the budget each call ran under."""

    name = "recording"
    reads_citing = False

    def __init__(self) -> None:
        self.settings = Budgeted()
        self.seen: list[float] = []

    def rerank(self, query, candidates, papers, citing=None):
        self.seen.append(self.settings.budget_s)
        return list(candidates)


def make_store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "s.sqlite")
    recs = [
        PaperRecord(title="Sparse retrieval with BM25 term weighting", abstract="Relevance.", key="a"),
        PaperRecord(title="Dense passage retrieval with dual encoders", abstract="QA.", key="b"),
    ]
    store.import_source("lib.jsonl", iter(recs), fmt="jsonl")
    return store


def test_the_stage_gets_what_the_prefetch_left(tmp_path: Path, monkeypatch) -> None:
    stage = RecordingStage()
    rec = R.Recommender(make_store(tmp_path), second_stage=stage)
    prefetch = rec.prefetch

    def slow_prefetch(*args, **kwargs):
        time.sleep(0.3)
        return prefetch(*args, **kwargs)

    monkeypatch.setattr(rec, "prefetch", slow_prefetch)
    got = rec.recommend(ContextQuery("term weighting for sparse retrieval"), k=2)
    assert [r.paper.key for r in got][0] == "a"
    (budget,) = stage.seen
    assert R.MIN_STAGE_S <= budget <= R.RERANKED_WITHIN_S - 0.3
    assert stage.settings.budget_s == 60.0  # the held stage is not changed
    monkeypatch.setattr(R, "RERANKED_WITHIN_S", 0.2)  # a prefetch past the whole budget
    rec.recommend(ContextQuery("dense retrieval"), k=2)
    assert stage.seen[-1] == R.MIN_STAGE_S


def test_within_leaves_untimed_and_tighter_stages_alone() -> None:
    stage = RecordingStage()
    assert R.within(stage, 100.0) is stage  # already within
    timed = R.within(stage, 0.5)
    assert timed is not stage and timed.settings.budget_s == 0.5 and timed.seen is stage.seen
    untimed = object()
    assert R.within(untimed, 0.5) is untimed
