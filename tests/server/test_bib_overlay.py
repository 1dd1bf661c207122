"""The workspace's own .bib entries ranked beside the store (server/bib_overlay.py), on real records."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from citewise.indexer import bm25_files
from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store, StoredPaper
from citewise.models.query import Candidate, ContextQuery
from citewise.models.recommender import Recommendation, Recommender
from citewise.server.bib_overlay import SOURCE, BibOverlay, merge_entries, store_knows, with_entries

from ..conftest import ACM_DL, require

SIGIR_2018 = ACM_DL / "sigir" / "sigir-2018.bib"

MADE_UP = """@inproceedings{smith2023hallucinated,
  title = {Pointer Networks for Citation Span Prediction in Legal Opinions},
  author = {Smith, Jane},
  booktitle = {Proceedings of Nowhere},
  year = {2023}
}
"""
COOKING = """@misc{pasta2020,
  title = {Cooking Pasta with Tomatoes and Basil},
  author = {Rossi, Maria},
  year = {2020}
}
"""


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory) -> Recommender:
    store = Store(tmp_path_factory.mktemp("overlay") / "s.sqlite")
    import_sources(store, [require(SIGIR_2018)])
    bm25_files.load_or_build(store)
    return Recommender(store, use_dense=False, use_reranker=False)


def sigir_entries(n: int) -> list[str]:
    text = require(SIGIR_2018).read_text(encoding="utf-8")
    return [e.strip() for e in re.split(r"\n(?=@)", text) if "abstract = {" in e][:n]


def rec_of(title: str, key: str) -> Recommendation:
    return Recommendation(StoredPaper(title=title, key=key, id=len(key)), Candidate(len(key), 1.0))


def test_only_entries_the_store_lacks_join_scored_on_its_scale(rec: Recommender) -> None:
    stored = sigir_entries(3)
    text = "\n\n".join([*stored, MADE_UP, COOKING])
    overlay = BibOverlay.build([("refs.bib", text)], store_knows(rec), rec.bm25)
    assert sorted(p.key for p in overlay.papers) == ["pasta2020", "smith2023hallucinated"]
    assert all(p.id == 0 for p in overlay.papers)
    hits = overlay.hits("pointer networks predict citation spans in legal opinions", 10)
    assert [p.key for p, _s in hits] == ["smith2023hallucinated"]  # the pasta entry shares no word
    # Scored with the store's statistics: the same words score the same as a stored paper would.
    alone = BibOverlay.build([("refs.bib", MADE_UP)])
    assert alone.hits("legal opinions", 1)[0][1] != hits[0][1]


def test_no_store_ranks_every_entry_by_the_sentence() -> None:
    text = COOKING + "\n" + MADE_UP  # file order: pasta first
    overlay = BibOverlay.build([("refs.bib", text)])
    assert len(overlay) == 2
    query = ContextQuery(local="pointer networks for citation span prediction")
    got = with_entries([], overlay, None, query, 10)
    assert [r.paper.key for r in got] == ["smith2023hallucinated"]
    assert got[0].candidate.sources == {SOURCE: pytest.approx(got[0].candidate.score)}


def test_merge_places_an_entry_where_the_stores_word_ranking_would() -> None:
    ranked = [rec_of(f"stored {i}", f"s{i}") for i in range(5)]
    weak = StoredPaper(title="weak", key="weak")
    strong = StoredPaper(title="strong", key="strong")
    store_scores = [9.0, 8.0, 7.0, 6.0, 5.0]
    got = merge_entries(ranked, [(weak, 5.5), (strong, 8.5)], store_scores)
    assert [r.paper.key for r in got] == ["s0", "strong", "s1", "s2", "s3", "weak", "s4"]
    below_all = merge_entries(ranked, [(weak, 1.0)], store_scores)
    assert below_all[-1].paper.key == "weak"
    assert merge_entries(ranked, [], store_scores) == ranked


def test_the_first_file_holding_a_key_wins(tmp_path: Path) -> None:
    other = MADE_UP.replace(
        "Pointer Networks for Citation Span Prediction in Legal Opinions", "Something Else"
    )
    overlay = BibOverlay.build([("a.bib", MADE_UP), ("b.bib", other)])
    assert [p.title for p in overlay.papers] == [
        "Pointer Networks for Citation Span Prediction in Legal Opinions"
    ]


def test_a_half_written_bib_keeps_its_whole_entries() -> None:
    text = MADE_UP + "\n@article{broken2024,\n  title = {Half written\n"
    overlay = BibOverlay.build([("refs.bib", text)])
    assert [p.key for p in overlay.papers] == ["smith2023hallucinated"]


def many_entries(n: int) -> str:
    return "\n".join(
        f"@misc{{e{i},\n  title = {{Topic {i} of glaciers and {'pointer networks' if i == n - 1 else 'rivers'}}},\n"
        f"  year = {{2020}}\n}}"
        for i in range(n)
    )


def test_the_cache_builds_a_large_bib_in_the_background_and_ranks_titles_meanwhile() -> None:
    """Above SYNC_CHARS the overlay is built in the pool; with no store the titles rank the
    entries meanwhile (never the file's order), and the cache says it is building."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from citewise.server.bib_overlay import SYNC_CHARS, OverlayCache
    from citewise.server.bibindex import BibIndex

    n = SYNC_CHARS // 60  # entries of about 80 characters: past the limit
    text = many_entries(n)
    assert len(text) > SYNC_CHARS
    gate, ready = threading.Event(), threading.Event()
    pool = ThreadPoolExecutor(1)
    pool.submit(gate.wait)  # hold the pool: the build waits behind it
    cache = OverlayCache(pool, on_ready=ready.set)
    texts = {"refs.bib": text}
    bib = BibIndex.from_texts(texts.items())
    meanwhile = cache.get(texts, None, bib)
    assert meanwhile is not None and cache.building()
    assert [p.key for p, _s in meanwhile.hits("pointer networks", 3)] == [f"e{n - 1}"]
    gate.set()
    assert ready.wait(60)
    full = cache.get(texts, None, bib)
    assert full is not meanwhile and not cache.building() and len(full) == n
    pool.shutdown()


def test_a_small_bib_is_built_at_once_and_cached() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from citewise.server.bib_overlay import OverlayCache
    from citewise.server.bibindex import BibIndex

    texts = {"refs.bib": MADE_UP + COOKING}
    cache = OverlayCache(ThreadPoolExecutor(1))
    first = cache.get(texts, None, BibIndex.from_texts(texts.items()))
    assert first is not None and len(first) == 2 and not cache.building()
    assert cache.get(dict(texts), None, BibIndex()) is first  # same texts, same store: cached
