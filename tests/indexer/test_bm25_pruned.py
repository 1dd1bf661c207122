"""Exact dynamic pruning in ``BM25Index.search`` (issue 28): the top k of the pruned path (MaxScore,
``indexer/bm25.py``) is the top k of scoring every document, on real citing sentences of ACM-CR
dev over the whole ACM-CR index (every k the prefetch and the editor use, with the prefetch's
exclusion mask, a selective mask, dedupe, and a delta of changed and removed papers), and on a
small synthetic corpus made of ties and zero scores.

"The same" allows only what floating point and ties allow: scores equal rank for rank within
1e-5 relative, and where the ids differ, the pruned path's document really has the tied score.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from citewise.indexer import bm25, bm25_files, bm25_topk
from citewise.indexer.bm25 import BM25Index
from citewise.indexer.store import Store

from ..conftest import ACM_DEV, require

KS = (1, 10, 20, 100, 1000)


@pytest.fixture
def always_prune(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pruned path at any corpus size and never given up for the dense one half-way, so every
    comparison below tests it (on a corpus of ACM-CR's size the default takes the dense path)."""
    monkeypatch.setattr(bm25_topk, "PRUNE_MIN_DOCS", 0)
    monkeypatch.setattr(bm25_topk, "PRUNE_DOCS_PER_LOOKUP", 0)
    monkeypatch.setattr(bm25_topk, "PRUNE_MAX_SHARE", float("inf"))


def check_same(
    index: BM25Index, terms: Counter[str], k: int, mask: np.ndarray | None = None, dedupe: bool = False
) -> bool:
    """Assert the pruned top k is the exhaustive one; False when the pruned path declined."""
    pruned = index._search_pruned(terms, k, mask, dedupe)
    if pruned is None:
        return False
    dense = index._search_exhaustive(terms, k, mask, dedupe)
    assert len(pruned) == len(dense), (k, terms)
    if not dense:
        return True
    got_ids = np.array([pid for pid, _ in pruned])
    got = np.array([s for _, s in pruned])
    want = np.array([s for _, s in dense])
    np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"k={k}")
    assert len(set(got_ids.tolist())) == len(got_ids)
    positions = np.array([index.position(int(pid)) for pid in got_ids])
    own = index.scores(terms, dedupe)[positions]  # what each returned document really scores
    np.testing.assert_allclose(own, got, rtol=1e-5)
    differ = got_ids != np.array([pid for pid, _ in dense])
    # A different id only in a tie: its own score is the exhaustive score at that rank (checked
    # above), and no better document is left out (the scores match rank for rank).
    assert (own[differ] > 0).all()
    if mask is not None:
        assert mask[positions].all()
    return True


# -- real data: ACM-CR ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def acm_index(acm_store: Store) -> BM25Index:
    index = bm25_files.load_index(bm25_files.index_folder(acm_store))
    assert index is not None
    return index


@pytest.fixture(scope="module")
def dev_queries(acm_index: BM25Index) -> list[Counter[str]]:
    """Every ACM-CR dev citing sentence with its citing title (the keystroke path's view); every
    fourth one also with the citing abstract (the longest view: 100+ terms)."""
    from citewise.evaluation.protocol import load_dev_queries

    out = []
    for i, q in enumerate(load_dev_queries(require(ACM_DEV), None)):
        text = q.query.text(with_title=True, with_abstract=i % 4 == 3)
        out.append(Counter(acm_index.tokenizer(text)))
    assert len(out) > 300
    return out


def masks(n: int) -> list[np.ndarray | None]:
    """No mask; the prefetch's kind (a few papers excluded); one that keeps 3% of the documents."""
    rng = np.random.default_rng(28)
    return [None, rng.random(n) > 0.01, rng.random(n) < 0.03]


def test_acm_cr_dev_sentences_get_the_exhaustive_top_k(
    acm_index: BM25Index, dev_queries: list[Counter[str]], always_prune: None
) -> None:
    """Each query at one k of KS in turn, with one of the masks or dedupe in turn."""
    variants = [(m, False) for m in masks(acm_index.size)] + [(None, True)]
    ran = 0
    for i, terms in enumerate(dev_queries):
        mask, dedupe = variants[(i // len(KS)) % len(variants)]
        ran += check_same(acm_index, terms, KS[i % len(KS)], mask, dedupe)
    assert ran == len(dev_queries)


def test_acm_cr_with_a_delta_of_changed_and_removed_papers(
    acm_store: Store, acm_index: BM25Index, dev_queries: list[Counter[str]], always_prune: None
) -> None:
    """Changed papers whose new text is a dev sentence (so they rank first, from the delta), and the
    best base paper of other sentences removed (so the pruned path must skip dead documents)."""
    sentences = [q.query.local for q in _dev(60)]
    rows = acm_store.conn.execute("SELECT id FROM papers ORDER BY id LIMIT 30 OFFSET 1000").fetchall()
    changed = [(pid, s, "", "") for (pid,), s in zip(rows, sentences[:30], strict=True)]
    removed = {acm_index._search_exhaustive(t, 1)[0][0] for t in dev_queries[30:60]}
    layered = acm_index.with_delta(changed, removed, acm_index.generation + 1)
    assert layered.delta_size == 30
    ran = 0
    for i, terms in enumerate(dev_queries[:120]):
        mask = masks(layered.size)[i % 2]
        ran += check_same(layered, terms, KS[i % len(KS)], mask, dedupe=i % 3 == 2)
    assert ran == 120
    top = [layered.search(terms, 1)[0][0] for terms in dev_queries[:30]]
    changed_ids = {pid for pid, *_ in changed}
    assert sum(pid in changed_ids for pid in top) >= 20  # the delta really competes


def _dev(n: int) -> list:
    from citewise.evaluation.protocol import load_dev_queries

    return load_dev_queries(require(ACM_DEV), None)[:n]


def test_default_settings_give_the_same_answers(
    acm_index: BM25Index, dev_queries: list[Counter[str]]
) -> None:
    """Whatever path ``search`` takes by default, it answers as the exhaustive one."""
    for i, terms in enumerate(dev_queries[:40]):
        k = KS[i % len(KS)]
        got, want = acm_index.search(terms, k), acm_index._search_exhaustive(terms, k)
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-5)


def test_a_declined_search_leaves_the_scratch_clean_for_the_dense_path(
    acm_index: BM25Index, dev_queries: list[Counter[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no share of the work allowed, every query that needs more than its probe is declined
    half-way (after the probe and θ): the dense path answers, and the next search starts clean."""
    monkeypatch.setattr(bm25_topk, "PRUNE_MIN_DOCS", 0)
    monkeypatch.setattr(bm25_topk, "PRUNE_DOCS_PER_LOOKUP", 0)
    monkeypatch.setattr(bm25_topk, "PRUNE_MAX_SHARE", 0.0)
    declined = 0
    for terms in dev_queries[:40]:
        if acm_index._search_pruned(terms, 20, None, False) is None:
            declined += 1
            assert acm_index.search(terms, 20) == acm_index._search_exhaustive(terms, 20)
        assert acm_index._scratch_buf is not None and not acm_index._scratch_buf.any()
    assert declined > 30


def test_the_impact_bound_holds_for_every_term(acm_index: BM25Index) -> None:
    """The bound the pruning relies on, ``idf * (k1 + 1)`` from N and the posting count, is above
    every impact the build stored (here the bounded build, which ``acm_store`` ran)."""
    idx = acm_index
    df = np.diff(idx.offsets)
    idf = np.log(1.0 + (idx.size - df + 0.5) / (df + 0.5))
    top = np.maximum.reduceat(np.asarray(idx.impacts), idx.offsets[:-1].astype(np.int64))
    assert (top <= idf * (idx.params.k1 + 1.0)).all()
    assert (np.asarray(idx.impacts) > 0).all()  # what lets the scratch vector tell candidates apart


# -- synthetic: ties and zeros ----------------------------------------------------------------------
WORDS = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega rho".split()


def synthetic(n: int = 3000, seed: int = 5) -> BM25Index:
    """Papers of a few words from a small skewed vocabulary, a third of them copies of an earlier
    paper (whole groups of exact ties, cut by every k), some with no text at all."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    p /= p.sum()
    texts: list[str] = []
    for i in range(n):
        if i and rng.random() < 0.33:
            texts.append(texts[int(rng.integers(0, i))])
        elif rng.random() < 0.02:
            texts.append("")
        else:
            texts.append(" ".join(rng.choice(WORDS, size=int(rng.integers(1, 8)), p=p)))
    return BM25Index.build([(1000 + i, t, "", "") for i, t in enumerate(texts)])


def reference(index: BM25Index, terms: Counter[str], k: int, mask: np.ndarray | None = None) -> list:
    """The documented order over every document: score descending, then position; positive only."""
    scores = index.scores(terms)
    if mask is not None:
        scores = np.where(mask, scores, -1.0)
    best = np.lexsort((np.arange(scores.shape[0]), -scores))[:k]
    return [(int(index.doc_ids[i]), float(scores[i])) for i in best if scores[i] > 0]


def synthetic_queries(seed: int = 9) -> list[Counter[str]]:
    rng = np.random.default_rng(seed)
    tok = bm25.Tokenizer()
    queries = [Counter(tok(" ".join(rng.choice(WORDS, size=int(rng.integers(1, 10)))))) for _ in range(60)]
    return queries + [Counter({"alpha": 0.5, "omega": 2.5, "rho": 0.0}), Counter({"nowhere": 1})]


@pytest.mark.parametrize("k", [1, 5, 20, 100, 1500, 5000])
def test_synthetic_ties_fall_by_position_and_zero_scores_are_left_out(k: int, always_prune: None) -> None:
    index = synthetic()
    mask = np.random.default_rng(3).random(index.size) > 0.2
    for terms in synthetic_queries():
        assert index._search_pruned(terms, k, None, False) == reference(index, terms, k)
        assert index._search_pruned(terms, k, mask, False) == reference(index, terms, k, mask)
        check_same(index, terms, k)
        check_same(index, terms, k, dedupe=True)


def test_synthetic_edge_cases(always_prune: None) -> None:
    index = synthetic()
    q = Counter(["alpha", "omega"])
    assert index.search(Counter({"nowhere": 1}), 10) == []
    assert index.search(q, 0) == []
    assert index.search(q, 10, mask=np.zeros(index.size, dtype=bool)) == []
    # Fewer matching documents than k: only those, none at zero.
    only = Counter(["rho"])
    assert index.search(only, 10_000) == reference(index, only, 10_000)
    assert 0 < len(index.search(only, 10_000)) < index.size
    # Every document matching the query removed: nothing (the base still holds their postings).
    gone = [pid for pid, _ in index._search_exhaustive(only, index.size)]
    assert index.with_delta([], gone, 1)._search_pruned(only, 10, None, False) == []
    # A negative weight has no bound: the dense path answers.
    odd = Counter({"alpha": -1.0, "beta": 2.0})
    assert index._search_pruned(odd, 10, None, False) is None
    assert index.search(odd, 10) == index._search_exhaustive(odd, 10)


def test_synthetic_delta_and_memory_mapped_arrays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, always_prune: None
) -> None:
    index = synthetic()
    bm25_files.save_index(index, tmp_path / "idx")
    monkeypatch.setattr(bm25_files, "MMAP_BYTES", 0)
    mapped = bm25_files.load_index(tmp_path / "idx")
    assert mapped is not None and isinstance(mapped.postings, np.memmap)
    layered = mapped.with_delta(
        [(1000, "alpha alpha omega", "", ""), (99_999, "rho rho beta", "", "")], [1001, 1002, 1003], 2
    )
    for terms in synthetic_queries():
        for k in (1, 20, 500):
            assert mapped.search(terms, k) == index.search(terms, k)
            assert mapped._search_pruned(terms, k, None, False) == reference(mapped, terms, k)
            assert check_same(layered, terms, k)
            assert check_same(layered, terms, k, mask=np.arange(layered.size) % 3 > 0)


def test_scratch_is_left_zeroed_and_concurrent_searches_agree(always_prune: None) -> None:
    """The pruned path reuses one scratch vector (zeroed where touched); a search in another
    thread meanwhile gets its own, so answers never mix."""
    index = synthetic(n=20_000)
    queries = synthetic_queries()
    want = [index.search(q, 50) for q in queries]
    assert index._scratch_buf is not None and not index._scratch_buf.any()
    got: dict[int, list] = {}

    def run(t: int) -> None:
        got[t] = [index.search(q, 50) for q in queries]

    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(g == want for g in got.values())
    assert not index._scratch_buf.any()
