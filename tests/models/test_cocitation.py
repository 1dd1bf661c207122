"""Co-citation and coupling with the draft's citations (``models/cocitation.py``), on a small store
whose citation file the test writes: an unstored citer, stored citers, and a record's references."""

from __future__ import annotations

import json
from pathlib import Path

from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store
from citewise.models import cocitation
from citewise.models.query import Candidate

PAPERS = [
    {"id": "bleu", "title": "BLEU: a Method for Automatic Evaluation of Machine Translation"},
    {"id": "moses", "title": "Moses: Open Source Toolkit for Statistical Machine Translation"},
    {"id": "giza", "title": "A Systematic Comparison of Various Statistical Alignment Models"},
    {"id": "tnt", "title": "TnT: A Statistical Part-of-Speech Tagger"},
    {"id": "mert", "title": "Minimum Error Rate Training in Statistical Machine Translation"},
]
# ext1 and ext2 are not stored (an edge file names citers whether or not the store holds them).
EDGES = "citing\tcited\next1\tbleu\next1\tmoses\next2\tbleu\next2\tmoses\next2\tgiza\nmert\tbleu\ntnt\ttnt\n"


def _store(tmp_path: Path) -> tuple[Store, dict[str, int]]:
    papers = tmp_path / "papers.jsonl"
    papers.write_text("".join(json.dumps(p) + "\n" for p in PAPERS), encoding="utf-8")
    edges = tmp_path / "edges.tsv"
    edges.write_text(EDGES, encoding="utf-8")
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [papers, edges])
    ids = dict(store.conn.execute("SELECT key, id FROM papers").fetchall())
    return store, ids


def test_papers_cited_beside_the_draft_citations_and_their_citers_rank_first(tmp_path: Path) -> None:
    store, ids = _store(tmp_path)
    graph = cocitation.graph_of(store)
    assert len(graph) == 6  # the self-citation is not an edge
    # A draft citing BLEU: Moses is co-cited with it twice, GIZA once, MERT cites it.
    scores = graph.scores([ids["bleu"]])
    assert scores == {ids["moses"]: 2, ids["giza"]: 1, ids["mert"]: 1}
    ranked = graph.ranked([ids["bleu"]])
    assert ranked[0] == (ids["moses"], 2.0) and {p for p, _ in ranked[1:]} == {ids["giza"], ids["mert"]}
    # Citing MERT too: BLEU is cited by MERT (coupling), and stays out as the draft's own.
    assert ids["bleu"] not in graph.scores([ids["bleu"], ids["mert"]])
    assert graph.scores([ids["mert"]]) == {ids["bleu"]: 1}
    assert graph.ranked([ids["tnt"]]) == []  # cited by nobody but itself
    store.close()


def test_fused_as_a_list_it_adds_papers_as_a_prior_it_only_reorders() -> None:
    cands = [Candidate(1, 1 / 61), Candidate(2, 1 / 62), Candidate(3, 1 / 63)]
    listed = [(3, 5.0), (9, 4.0)]
    as_list = cocitation.fuse([Candidate(c.paper_id, c.score) for c in cands], listed, 1.0)
    assert [c.paper_id for c in as_list] == [3, 1, 2, 9]
    assert as_list[0].ranks[cocitation.SOURCE] == 1 and as_list[0].sources[cocitation.SOURCE] == 5.0
    as_prior = cocitation.fuse([Candidate(c.paper_id, c.score) for c in cands], listed, 1.0, only_found=True)
    assert [c.paper_id for c in as_prior] == [3, 1, 2]
    assert cocitation.fuse(cands, listed, 0.0) is cands


def test_recommend_lifts_what_is_cited_beside_the_draft_citations_and_adds_nothing(tmp_path: Path) -> None:
    """Through the recommender: for a draft citing BLEU, the papers cited beside it or citing it
    pass the one the sentence's words prefer, and no paper the sentence does not find is added."""
    from citewise.models.query import ContextQuery
    from citewise.models.recommender import Recommender

    store, ids = _store(tmp_path)
    rec = Recommender(store, use_dense=False, use_reranker=False)
    query = ContextQuery("a statistical tagger toolkit")
    plain = [r.paper.id for r in rec.recommend(query, 10, excluded=[ids["bleu"]])]
    tnt = plain.index(ids["tnt"])
    assert tnt < plain.index(ids["giza"]) and tnt < plain.index(ids["mert"])  # by its words: the tagger
    lifted = [r.paper.id for r in rec.recommend(query, 10, excluded=[ids["bleu"]], cited=[ids["bleu"]])]
    assert lifted[-1] == ids["tnt"] and set(lifted) == set(plain)  # the three around BLEU pass it
    # TnT is cited by nobody else: nothing moves.
    assert [r.paper.id for r in rec.recommend(query, 10, excluded=[ids["bleu"]], cited=[ids["tnt"]])] == plain
    store.close()


def test_a_graph_too_big_to_hold_steps_aside(tmp_path: Path, monkeypatch) -> None:
    store, ids = _store(tmp_path)
    monkeypatch.setattr(cocitation, "MAX_EDGES", 5)  # the file has 7 edges
    assert len(cocitation.graph_of(store)) == 0
    cands = [Candidate(ids["tnt"], 0.1), Candidate(ids["moses"], 0.05)]
    assert cocitation.with_cocitation(cands, store, [ids["bleu"]]) == cands
    store.close()
