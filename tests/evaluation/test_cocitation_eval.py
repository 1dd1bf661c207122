"""The leave-one-out measurement of co-citation (``evaluation/cocitation_eval.py``) on a small
store the test writes: the draft's citations are the paper's references minus the sentence's."""

from __future__ import annotations

from pathlib import Path

from citewise.evaluation import cocitation_eval as ce
from citewise.evaluation.protocol import EvalQuery
from citewise.models.query import ContextQuery
from citewise.models.recommender import Recommender

from ..models.test_cocitation import _store


def test_the_sentence_cited_paper_is_left_out_of_the_draft_and_its_co_cited_rank_rises(
    tmp_path: Path,
) -> None:
    store, ids = _store(tmp_path)
    key_of = {pid: key for key, pid in ids.items()}
    query = EvalQuery("draft#1", "draft", ContextQuery("a statistical tagger toolkit"), {"giza"}, "")
    # The paper cites BLEU, Moses and GIZA; the sentence cites GIZA, so the draft's are BLEU and Moses.
    data = ce.Dataset([query], key_of, {ids["bleu"]}, {}, {"draft": {"bleu", "moses", "giza"}})
    rec = Recommender(store, use_dense=False, use_reranker=False)
    rows, seen = ce.run(rec, data)
    assert seen == {"queries": 1, "with_draft_citations": 1, "with_list": 1, "graph_edges": 6}
    before, after = rows["prefetch"]["draft#1"]["MRR"], rows["co-cited prior"]["draft#1"]["MRR"]
    assert before < after == 1.0  # GIZA, co-cited with both, passes the tagger the words prefer
    # Without other references there is no draft, and nothing moves.
    data.references = {"draft": {"giza"}}
    rows, seen = ce.run(rec, data)
    assert seen["with_draft_citations"] == 0 and rows["co-cited prior"] == rows["prefetch"]
    store.close()
