"""``BM25Index.search`` returns the documented top k: every document's score as numpy computes it
(each term's weighted impacts added in query order, float32), best first, ties by position, only
positive scores. Checked against a pure-numpy reference on real citing sentences of ACM-CR dev
over the whole ACM-CR index (every k the prefetch and the editor use, with the prefetch's
exclusion mask, a selective mask, dedupe, and a delta of changed and removed papers), and on a
small synthetic corpus made of ties and zero scores; with the compiled loop and the sampled top-k
(``bm25._holding_top``) forced on, as they run past a quarter of a million papers.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from citewise.indexer import bm25, bm25_files
from citewise.indexer.bm25 import BM25Index
from citewise.indexer.store import Store

from ..conftest import ACM_DEV, require

KS = (1, 10, 20, 100, 173, 1000)


@pytest.fixture(params=["compiled", "default"])
def sampling(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """As a ten-million-paper index searches (the compiled loop and the top k from a sample's
    floor, forced on these small corpora), and as their size decides (numpy, every score)."""
    if request.param == "compiled":
        monkeypatch.setattr(bm25, "TOP_K_SAMPLE", 256)
        monkeypatch.setattr(bm25, "COMPILED_MIN_DOCS", 0)
    return request.param


def reference(
    index: BM25Index, terms: Counter[str], k: int, mask: np.ndarray | None = None, dedupe: bool = False
) -> list[tuple[int, float]]:
    """Numpy's scatter-adds in query order over the base, the delta's own, removed documents at
    zero; then score descending, position ascending over every document; positive only."""

    def numpy_scores(idx: BM25Index) -> np.ndarray:
        out = np.zeros(idx.base_ids.shape[0], dtype=np.float32)
        for term, qtf in terms.items():
            tid = idx.vocab.get(term)
            if tid is None:
                continue
            lo, hi = idx.offsets[tid], idx.offsets[tid + 1]
            w = 1.0 if dedupe else float(qtf)
            out[idx.postings[lo:hi]] += idx.impacts[lo:hi] if w == 1.0 else w * idx.impacts[lo:hi]
        return out

    scores = numpy_scores(index)
    if index._alive is not None:
        scores *= index._alive
    if index._delta is not None:
        scores = np.concatenate([scores, numpy_scores(index._delta)])
    if mask is not None:
        scores = np.where(mask, scores, -1.0)
    best = np.lexsort((np.arange(scores.shape[0]), -scores))[:k]
    return [(int(index.doc_ids[i]), float(scores[i])) for i in best if scores[i] > 0]


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


def test_acm_cr_dev_sentences_get_the_documented_top_k(
    acm_index: BM25Index, dev_queries: list[Counter[str]], sampling: str
) -> None:
    """Each query at one k of KS in turn, with one of the masks or dedupe in turn."""
    variants = [(m, False) for m in masks(acm_index.size)] + [(None, True)]
    for i, terms in enumerate(dev_queries):
        mask, dedupe = variants[(i // len(KS)) % len(variants)]
        k = KS[i % len(KS)]
        assert acm_index.search(terms, k, mask, dedupe) == reference(acm_index, terms, k, mask, dedupe), i


def test_acm_cr_with_a_delta_of_changed_and_removed_papers(
    acm_store: Store, acm_index: BM25Index, dev_queries: list[Counter[str]], sampling: str
) -> None:
    """Changed papers whose new text is a dev sentence (so they rank first, from the delta), and the
    best base paper of other sentences removed (so dead documents must stay out)."""
    from citewise.evaluation.protocol import load_dev_queries

    sentences = [q.query.local for q in load_dev_queries(require(ACM_DEV), None)[:30]]
    rows = acm_store.conn.execute("SELECT id FROM papers ORDER BY id LIMIT 30 OFFSET 1000").fetchall()
    changed = [(pid, s, "", "") for (pid,), s in zip(rows, sentences, strict=True)]
    removed = {acm_index.search(t, 1)[0][0] for t in dev_queries[30:60]}
    layered = acm_index.with_delta(changed, removed, acm_index.generation + 1)
    assert layered.delta_size == 30
    for i, terms in enumerate(dev_queries[:120]):
        mask, k, dedupe = masks(layered.size)[i % 2], KS[i % len(KS)], i % 3 == 2
        assert layered.search(terms, k, mask, dedupe) == reference(layered, terms, k, mask, dedupe), i
    top = [layered.search(terms, 1)[0][0] for terms in dev_queries[:30]]
    changed_ids = {pid for pid, *_ in changed}
    assert sum(pid in changed_ids for pid in top) >= 20  # the delta really competes
    assert not removed & {pid for t in dev_queries[30:60] for pid, _ in layered.search(t, 20)}


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


def synthetic_queries(seed: int = 9) -> list[Counter[str]]:
    rng = np.random.default_rng(seed)
    tok = bm25.Tokenizer()
    queries = [Counter(tok(" ".join(rng.choice(WORDS, size=int(rng.integers(1, 10)))))) for _ in range(60)]
    return queries + [Counter({"alpha": 0.5, "omega": 2.5, "rho": 0.0}), Counter({"nowhere": 1})]


@pytest.mark.parametrize("k", [1, 5, 20, 100, 1500, 5000])
def test_synthetic_ties_fall_by_position_and_zero_scores_are_left_out(k: int, sampling: str) -> None:
    index = synthetic()
    mask = np.random.default_rng(3).random(index.size) > 0.2
    for terms in synthetic_queries():
        assert index.search(terms, k) == reference(index, terms, k)
        assert index.search(terms, k, mask) == reference(index, terms, k, mask)
        assert index.search(terms, k, dedupe=True) == reference(index, terms, k, dedupe=True)


def test_synthetic_edge_cases(sampling: str) -> None:
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
    gone = [pid for pid, _ in index.search(only, index.size)]
    assert index.with_delta([], gone, 1).search(only, 10) == []
    # A negative weight: scores as numpy adds them, negative ones left out.
    odd = Counter({"alpha": -1.0, "beta": 2.0})
    assert index.search(odd, 10) == reference(index, odd, 10)


def test_synthetic_delta_and_memory_mapped_arrays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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
            assert mapped.search(terms, k) == index.search(terms, k) == reference(mapped, terms, k)
            assert layered.search(terms, k) == reference(layered, terms, k)
            third = np.arange(layered.size) % 3 > 0
            assert layered.search(terms, k, third) == reference(layered, terms, k, third)


def test_concurrent_searches_agree(sampling: str) -> None:
    """Searches in four threads at once (the kernel leaves the interpreter while it adds) answer
    as one thread does."""
    index = synthetic(n=20_000)
    queries = synthetic_queries()
    want = [index.search(q, 50) for q in queries]
    got: dict[int, list] = {}

    def run(t: int) -> None:
        got[t] = [index.search(q, 50) for q in queries]

    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(g == want for g in got.values())
