"""Each placeholder its own clause in every stage that reads a query as one text (the dense list,
the ``cited-as`` list, the teacher): ``focus_query`` and ``focused_vector`` on hand-written
sentences, the prefetch asking its dense source with them, and the shipped bi-encoder's vectors
on the example draft's three-citation sentence (skipped when the model is absent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store
from citewise.models.focus import OTHER_MARK as O
from citewise.models.focus import PLACEHOLDER_MARK as P
from citewise.models.focus import focus_query, focus_text, focused_vector, marked_query
from citewise.models.prefetch import DENSE, Prefetcher, PrefetchSettings
from citewise.models.query import ContextQuery

SENTENCE = (
    "We embed papers with a network trained with triplet loss and hard negative mining {0}, search "
    "them with a navigable small world graph index {1}, and fuse the lists by their reciprocal ranks {2}."
)
CLAUSES = [
    "We embed papers with a network trained with triplet loss and hard negative mining",
    "search them with a navigable small world graph index",
    "fuse the lists by their reciprocal ranks",
]


def at_marker(i: int, title: str = "") -> ContextQuery:
    marks = [O, O, O]
    marks[i] = P
    return marked_query(SENTENCE.format(*marks), title)


def test_each_placeholder_gets_its_own_clause_with_its_position() -> None:
    for i, clause in enumerate(CLAUSES):
        q = focus_query(at_marker(i, "Citing title"))
        assert q.local == clause and q.at == len(clause) and q.others == ()
        assert q.citing_title == "Citing title"
    single = marked_query(f"Triplet loss {P} for face embeddings.")
    assert focus_query(single) is single  # one citation: the query itself, ranked as before
    plain = ContextQuery("no position")
    assert focus_query(plain) is plain


@pytest.mark.parametrize(
    ("marked", "expected"),
    [
        # an enumeration's cue ends the clause: the item is the placeholder's own
        (
            f"Neural ranking models such as MatchPyramid {P}, DRMM {O} and KNRM {O} are strong.",
            "MatchPyramid",
        ),
        (f"Deep models (e.g., DRMM {P} and KNRM {O}) work well.", "DRMM"),
        (f"Several signals, including dwell time {P} and clicks {O}, were used.", "dwell time"),
        (f"Click models {O}; for example, the cascade model {P}, fit logs.", "the cascade model"),
    ],
)
def test_enumerations_split_into_their_items(marked: str, expected: str) -> None:
    assert focus_query(marked_query(marked)).local == expected
    assert focus_text(marked_query(marked))[0].strip(" ,") == expected


def _bag(words: list[str]):
    """A bag-of-words encoder over ``words`` (unit vectors): enough to see which words a vector holds."""

    def encode(q: ContextQuery) -> np.ndarray:
        text = q.local.lower()
        v = np.array([float(w in text) for w in words], dtype=np.float32) + 1e-3
        return v / np.linalg.norm(v)

    return encode


def test_the_focused_vector_weighs_the_clause_against_the_sentence() -> None:
    words = ["triplet", "navigable", "reciprocal", "embed"]
    encode = _bag(words)
    whole = encode(at_marker(0))
    vecs = [focused_vector(encode, at_marker(i)) for i in range(3)]
    for i, v in enumerate(vecs):
        assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-5
        own = [j for j, w in enumerate(words[:3]) if w in CLAUSES[i]][0]
        others = [j for j in range(3) if j != own]
        assert all(v[own] > v[j] for j in others), "its own clause's words lead"
        assert all(v[j] > 0.1 for j in others), "the rest of the sentence still counts"
    assert np.allclose(focused_vector(encode, at_marker(1), rest_weight=1.0), whole)
    single = marked_query(f"Triplet loss {P} for face embeddings.")
    assert np.array_equal(focused_vector(encode, single), encode(single))


class VectorSource:
    """A dense index at its boundary: records the vectors and queries it was asked with."""

    def __init__(self, ids: list[int], encode, vectors: bool = True) -> None:
        self.ids, self.asked = ids, []
        self.encoder = type("Enc", (), {"encode_query": staticmethod(encode)})()
        if vectors:
            self.search_vector = self._search_vector

    def search_query(self, query: ContextQuery, k: int) -> list[tuple[int, float]]:
        self.asked.append(query)
        return [(p, 1.0) for p in self.ids[:k]]

    def _search_vector(self, vec: np.ndarray, k: int) -> list[tuple[int, float]]:
        self.asked.append(vec)
        return [(p, 1.0) for p in self.ids[:k]]


def test_the_prefetch_asks_the_dense_source_with_the_placeholders_clause(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    recs = [
        PaperRecord(title=f"Paper {w}", abstract=f"About {w}.", key=w) for w in ("triplet", "graph", "rank")
    ]
    store.import_source("lib.jsonl", iter(recs), fmt="jsonl")
    encode = _bag(["triplet", "navigable", "reciprocal"])
    with_vectors = VectorSource([1, 2, 3], encode)
    pf = Prefetcher(None, with_vectors, PrefetchSettings())
    for i in range(3):
        assert pf.source_lists(at_marker(i), "dense")[DENSE][0] == (1, 1.0)
        assert np.allclose(with_vectors.asked[-1], focused_vector(encode, at_marker(i)))
    single = marked_query(f"Triplet loss {P} for face embeddings.")
    pf.source_lists(single, "dense")
    assert with_vectors.asked[-1] is single  # one citation: asked with its query, as before
    text_only = VectorSource([1, 2, 3], encode, vectors=False)
    Prefetcher(None, text_only, PrefetchSettings()).source_lists(at_marker(2), "dense")
    assert text_only.asked[-1].local == CLAUSES[2]  # no vector search: the clause as its query
    before = VectorSource([1, 2, 3], encode)
    Prefetcher(None, before, PrefetchSettings(rest_weight=1.0)).source_lists(at_marker(2), "dense")
    assert before.asked[-1] == at_marker(2)  # rest weight 1: the whole sentence alike


def test_the_shipped_bi_encoder_finds_each_clauses_paper() -> None:
    """With the real model: the example draft's three placeholders each get a vector nearer their
    own paper's title than the whole sentence's vector is, and no two are the same."""
    from citewise.models import dense_index

    folder = dense_index.default_model_dir().parent / "dense"
    if not (folder / "manifest.json").exists():
        pytest.skip("the shipped bi-encoder (models/dense) is not installed")
    enc = dense_index.make_encoder(folder)
    titles = [
        PaperRecord(title="FaceNet: A Unified Embedding for Face Recognition and Clustering", abstract=""),
        PaperRecord(
            title="Efficient and Robust Approximate Nearest Neighbor Search Using Hierarchical "
            "Navigable Small World Graphs",
            abstract="",
        ),
        PaperRecord(
            title="Reciprocal Rank Fusion Outperforms Condorcet and Individual Rank Learning Methods",
            abstract="",
        ),
    ]
    papers = enc.encode_papers(titles)
    whole = enc.encode_query(at_marker(0))
    vecs = [focused_vector(enc.encode_query, at_marker(i)) for i in range(3)]
    for i, v in enumerate(vecs):
        assert float(papers[i] @ v) > float(papers[i] @ whole)
    assert min(float(vecs[i] @ vecs[j]) for i in range(3) for j in range(i + 1, 3)) < 0.99


def test_neighbouring_placeholders_sharing_a_top_10_are_counted() -> None:
    from citewise.evaluation.placeholders import shared_with_neighbour
    from citewise.evaluation.protocol import EvalQuery

    def q(qid: str, rel: set[str]) -> EvalQuery:
        return EvalQuery(qid, "c", ContextQuery("x"), rel, "x")

    queries = [
        q("p#1@1", {"a"}),
        q("p#1@2", {"b"}),
        q("p#1@3", {"c"}),  # same list as @2, different papers: both count
        q("p#2@1", {"a"}),
        q("p#2@2", {"a"}),  # same papers: sharing a list is right, and one group is no multi-group
        q("p#3@1", {"d"}),  # one query in its sentence: not counted
    ]
    top = {"p#1@1": ["1", "2"], "p#1@2": ["3", "4"], "p#1@3": ["4", "3"], "p#2@1": ["1"], "p#2@2": ["1"]}
    top["p#3@1"] = ["9"]
    got = shared_with_neighbour(queries, top)
    assert (got.placeholders, got.shared, got.fraction) == (3, 2, 0.6667)
    top["p#1@1"] = ["3", "4"]  # now @1 and @2 share too; @1 is not @3's neighbour
    assert shared_with_neighbour(queries, top).shared == 3
