"""The in-memory BM25 engine against a brute-force BM25, plus persistence and staleness."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from citewise.indexer import bm25, bm25_files
from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store

DOCS = [
    (
        1,
        "Neural ranking models for ad hoc retrieval",
        "We study neural ranking with query term matching.",
        "ranking",
    ),
    (
        2,
        "Query expansion with word embeddings",
        "Expansion terms from embeddings improve recall of retrieval.",
        "",
    ),
    (
        3,
        "Click models for web search",
        "User clicks as implicit relevance feedback in web search.",
        "clicks, search",
    ),
    (
        4,
        "Dense passage retrieval",
        "Dense retrieval with dual encoders beats BM25 on open domain QA.",
        "retrieval",
    ),
    (5, "Café culture", "Nothing about retrieval at all, only coffee and cafés.", ""),
]


def brute_force(query: str, k1: float = 1.2, b: float = 0.75) -> dict[int, float]:
    tok = bm25.Tokenizer()
    docs = {pid: Counter(tok(" ".join((t, a, kw)))) for pid, t, a, kw in DOCS}
    n = len(docs)
    avgdl = sum(sum(c.values()) for c in docs.values()) / n
    out: dict[int, float] = {}
    for pid, tf in docs.items():
        dl = sum(tf.values())
        s = 0.0
        for term, qtf in Counter(tok(query)).items():
            df = sum(1 for c in docs.values() if term in c)
            if term not in tf:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            s += qtf * idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * dl / avgdl))
        if s > 0:
            out[pid] = s
    return out


@pytest.mark.parametrize(
    "query", ["neural retrieval", "web search clicks", "retrieval retrieval dense", "cafe", "zzz"]
)
def test_scores_match_brute_force(query: str) -> None:
    index = bm25.BM25Index.build(DOCS)
    got = dict(index.search(query, 10))
    want = brute_force(query)
    assert got.keys() == want.keys()
    for pid, score in want.items():
        assert got[pid] == pytest.approx(score, rel=1e-5)
    ranked = [pid for pid, _ in index.search(query, 10)]
    assert ranked == sorted(want, key=lambda p: (-want[p], ranked.index(p)))


def test_tokenizer_folds_stems_and_drops_stopwords() -> None:
    tok = bm25.Tokenizer()
    assert tok("The Cafés are RANKING rankings") == ["cafe", "rank", "rank"]


def test_mask_and_top_k_order() -> None:
    index = bm25.BM25Index.build(DOCS)
    mask = index.mask_for([1, 2, 3, 5])
    assert 4 not in [pid for pid, _ in index.search("retrieval", 10, mask=mask)]
    scores = np.array([0.5, 2.0, 2.0, 0.0, 1.0], dtype=np.float32)
    assert bm25.top_k(scores, 3, np.arange(5)) == [(1, 2.0), (2, 2.0), (4, 1.0)]


def test_store_index_persists_and_rebuilds_when_stale(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    recs = [PaperRecord(title=t, abstract=a, keywords=kw, key=f"k{pid}") for pid, t, a, kw in DOCS]
    store.import_source("lib.jsonl", iter(recs), fmt="jsonl")
    first = bm25_files.load_or_build(store)
    assert bm25_files.index_folder(store).exists()
    loaded = bm25_files.load_or_build(store)
    assert loaded.generation == first.generation and not hasattr(loaded, "build_seconds"), (
        "loaded, not rebuilt"
    )
    store.import_source(
        "more.jsonl", iter([PaperRecord(title="Learning to rank with retrieval signals")]), fmt="jsonl"
    )
    rebuilt = bm25_files.load_or_build(store, allow_delta=False)
    assert rebuilt.size == 6 and hasattr(rebuilt, "build_seconds")
    assert store.get(rebuilt.search("learning signals", 1)[0][0]).title.startswith("Learning to rank")


def test_small_changes_are_served_by_a_delta_that_matches_a_rebuild(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    recs = [PaperRecord(title=t, abstract=a, keywords=kw, key=f"k{pid}") for pid, t, a, kw in DOCS]
    store.import_source("lib.jsonl", iter(recs), fmt="jsonl")
    bm25_files.load_or_build(store, allow_delta=False)
    # An edit (k2's title), an addition and a removal (k5) since the saved base.
    recs[1] = PaperRecord(
        title="Query expansion with pseudo relevance feedback", abstract=DOCS[1][2], key="k2"
    )
    recs.append(
        PaperRecord(title="Learning to rank with click signals", abstract="Clicks as labels.", key="k6")
    )
    del recs[4]
    store.import_source("lib.jsonl", iter(recs), fmt="jsonl")
    layered = bm25_files.load_or_build(store)
    assert not hasattr(layered, "build_seconds") and layered.delta_size == 2
    assert layered.generation == store.generation
    full = bm25.BM25Index.from_store(store)
    for query in ("pseudo relevance feedback", "click signals", "embeddings", "cafe culture", "retrieval"):
        got = dict(layered.search(query, 10))
        want = dict(full.search(query, 10))
        assert got.keys() == want.keys(), query
        # The delta keeps the base's statistics (on five papers they move a lot; on a real store
        # hardly), so scores differ a little but the best match is the same.
        if want:
            assert max(got, key=got.get) == max(want, key=want.get), query
    k5 = store.find(key="k5")
    assert k5 is None and "caf" not in " ".join(
        store.get(p).title.lower() for p, _ in layered.search("cafe", 5)
    )
    mask = layered.mask_for([store.find(key="k6").id])
    assert [store.get(p).key for p, _ in layered.search("click", 5, mask=mask)] == ["k6"]
    # Left out, a changed paper is gone from the delta too (its base copy is dead already).
    for changed in layered.search("click", 5):
        without = layered.mask_for([changed[0]], allowed=False)
        assert changed[0] not in [p for p, _ in layered.search("click", 5, mask=without)]


def test_fts_or_query_is_safe() -> None:
    q = bm25.fts_or_query('he said "NEAR(a b)" AND -x* OR the')
    assert q == '"said" OR "near" OR "b" OR "x"'


def test_a_delta_serves_up_to_a_share_of_the_store_then_a_rebuild_does(tmp_path: Path, monkeypatch) -> None:
    """A large addition to a large store (a 50k-entry .bib into a million papers) is served by a
    delta, not a full rebuild, as long as it is a small share of the base; past that, a rebuild."""
    monkeypatch.setattr(bm25_files, "MAX_DELTA", 5)
    monkeypatch.setattr(bm25_files, "DELTA_SHARE", 0.25)
    store = Store(tmp_path / "s.sqlite")
    base = [PaperRecord(title=f"Base paper {i} on retrieval topic {i}", key=f"b{i}") for i in range(100)]
    store.import_source("base.jsonl", iter(base), fmt="jsonl")
    bm25_files.load_or_build(store, allow_delta=False)
    added = [PaperRecord(title=f"Added paper {i} about graphs {i}", key=f"a{i}") for i in range(20)]
    store.import_source("added.jsonl", iter(added), fmt="jsonl")
    layered = bm25_files.load_or_build(store)
    assert not hasattr(layered, "build_seconds") and layered.delta_size == 20  # 20 > 5, <= 25% of 100
    assert store.get(layered.search("added graphs 7", 1)[0][0]).key == "a7"
    more = [PaperRecord(title=f"Another paper {i} about trees", key=f"m{i}") for i in range(10)]
    store.import_source("more.jsonl", iter(more), fmt="jsonl")
    assert hasattr(bm25_files.load_or_build(store), "build_seconds")  # 30 changed > 25: rebuilt


def test_doc_impacts_are_the_index_own_impacts_and_score_as_search_does() -> None:
    """A paper's impacts recomputed from its text under the index's statistics (what the Milvus
    engine stores) are the posting impacts the build wrote, citing field included; and the inner
    product of a query's term weights with them is the index's score of that paper."""
    docs = [
        (*d, "Cited for dense retrieval and ranking." if d[0] in (1, 4) else "", 2 if d[0] in (1, 4) else 0)
        for d in DOCS
    ]
    index = bm25.BM25Index.build(docs)
    mine = dict(index.doc_impacts(docs))
    for term, tid in index.vocab.items():
        lo, hi = index.offsets[tid], index.offsets[tid + 1]
        for pos, impact in zip(index.postings[lo:hi].tolist(), index.impacts[lo:hi].tolist(), strict=True):
            assert mine[int(index.doc_ids[pos])][term] == impact
    assert sum(len(v) for v in mine.values()) == int(index.offsets[-1])
    query = Counter(index.tokenizer("dense retrieval ranking cafe"))
    for pid, score in index.search(query, 5):
        assert sum(w * mine[pid].get(t, 0.0) for t, w in query.items()) == pytest.approx(score, rel=1e-6)


def test_feedback_terms_weigh_by_idf() -> None:
    index = bm25.BM25Index.build(DOCS)
    texts = ["dense retrieval retrieval", "dense passage"]
    got = index.expansion_terms(texts, 2)
    assert set(got) == {"dens", "passag"} and set(got.values()) == {1}  # rarer than "retriev"
    assert bm25.idf(5, 0) == 0.0 and bm25.idf(5, 1) > bm25.idf(5, 4) > 0
