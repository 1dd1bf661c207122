"""The bounded-memory BM25 build (indexer/bm25_build.py) makes the very index the in-memory build
makes: same vocabulary, postings, impacts and statistics, array for array, hence the same top 100
for any query; on ACM-CR, and on ACL papers with citation data (the citing field and counts),
with budgets small enough that the build goes through many blocks and merge ranges."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from citewise.indexer import bm25_files, mapped_pages
from citewise.indexer.bm25 import BM25Index, BM25Params
from citewise.indexer.bm25_build import build_index_folder
from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store

from ..conftest import ACL_XML, ACM_DEV, SHARED_DATA, require

ARRAYS = ("doc_ids", "offsets", "postings", "impacts", "citing_counts")


def assert_same(a: BM25Index, b: BM25Index, queries: list[str]) -> None:
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.vocab == b.vocab
    assert (a.avgdl, a.avgcl, a.generation, a.params) == (b.avgdl, b.avgcl, b.generation, b.params)
    for q in queries:
        assert a.search(q, 100) == b.search(q, 100), q


def dev_sentences(n: int) -> list[str]:
    from citewise.evaluation.protocol import load_dev_queries

    return [q.query.text() for q in load_dev_queries(require(ACM_DEV), None)[:n]]


def test_acm_cr_index_is_the_in_memory_one(acm_store: Store) -> None:
    """The session's ACM-CR store was indexed by load_or_build, i.e. by the bounded build."""
    saved = bm25_files.load_index(bm25_files.index_folder(acm_store))
    assert saved is not None
    assert_same(BM25Index.from_store(acm_store), saved, dev_sentences(40))


@pytest.fixture(scope="module")
def acl_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """ACL papers of a few volumes with the shared citation edges and citing sentences."""
    citations = SHARED_DATA / "citations"
    files = [require(ACL_XML) / f"{v}.xml" for v in ("P05", "P06", "N06", "J93", "A00", "W06")]
    store = Store(tmp_path_factory.mktemp("acl") / "acl.sqlite")
    import_sources(store, [f for f in files if f.exists()])
    import_sources(
        store,
        [require(citations / "acl-citation-edges.tsv"), require(citations / "scisummnet-citances.jsonl")],
    )
    return store


def test_acl_with_citation_data_in_many_blocks(acl_store: Store, tmp_path: Path) -> None:
    stats = build_index_folder(
        acl_store,
        tmp_path / "idx",
        BM25Params(),
        index_version=bm25_files.INDEX_VERSION,
        block_docs=300,
        chunk_postings=5000,
    )
    assert stats.blocks > 1 and stats.merge_ranges > 1, stats
    built = bm25_files.load_index(tmp_path / "idx")
    assert built is not None
    reference = BM25Index.from_store(acl_store)
    assert int((reference.citing_counts > 0).sum()) > 100  # the citing field is really exercised
    queries = [
        "statistical machine translation with phrase based models",
        "we use a maximum entropy part of speech tagger",
        "dependency parsing with online large margin training",
    ]
    assert_same(reference, built, queries)


def test_progress_ticks_once_a_paper_and_a_kill_leaves_the_old_index(
    acl_store: Store, tmp_path: Path
) -> None:
    ticks: list[int] = []
    merged: list[tuple[int, int]] = []
    folder = tmp_path / "idx"
    stats = build_index_folder(
        acl_store,
        folder,
        on_doc=lambda: ticks.append(1),
        index_version=3,
        block_docs=300,
        chunk_postings=5_000,
        on_merge=lambda done, total: merged.append((done, total)),
    )
    assert len(ticks) == acl_store.count()
    # the merge reports from 0 to every posting, once a range of terms (several here)
    assert merged[0] == (0, stats.postings) and merged[-1] == (stats.postings, stats.postings)
    assert len(merged) == stats.merge_ranges + 1 > 2
    assert [d for d, _ in merged] == sorted(d for d, _ in merged)
    before = {f.name: f.read_bytes() for f in folder.iterdir()}

    class Stop(Exception):
        pass

    def stop_midway() -> None:
        ticks.append(1)
        if len(ticks) > acl_store.count() * 1.5:
            raise Stop

    with pytest.raises(Stop):
        build_index_folder(acl_store, folder, on_doc=stop_midway, index_version=3, block_docs=300)
    assert {f.name: f.read_bytes() for f in folder.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]  # no half-built folder left


def test_big_posting_files_are_mapped_checked_and_rank_the_same(
    acl_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MMAP_BYTES the postings and impacts are memory-mapped (a 10M-paper index is 4-5 GB of
    them): the same rankings, and a damaged file is still caught before it is searched."""
    folder = tmp_path / "idx"
    build_index_folder(acl_store, folder, index_version=bm25_files.INDEX_VERSION, block_docs=300)
    in_ram = bm25_files.load_index(folder)
    monkeypatch.setattr(bm25_files, "MMAP_BYTES", 0)
    mapped = bm25_files.load_index(folder)
    assert in_ram is not None and mapped is not None
    assert isinstance(mapped.postings, np.memmap) and not isinstance(in_ram.postings, np.memmap)
    assert_same(
        in_ram,
        mapped,
        ["statistical machine translation", "part of speech tagging with a hidden markov model"],
    )
    del mapped
    postings = np.load(folder / "postings.npy")
    postings[len(postings) // 2] = 10**8  # points past the documents; same size, so meta agrees
    np.save(folder / "postings.npy", postings)
    index, problem = bm25_files.load_checked(folder)
    assert index is None and "past the documents" in problem


def test_a_mapped_index_past_its_budget_is_unmapped_and_ranks_the_same(
    acl_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server keeps at most ``$CITEWISE_MAPPED_INDEX_MB`` of mapped files: past it, a search
    unmaps the index's pages (indexer/mapped_pages.py), and the searches after it, which map them
    again, rank as before. Under the budget nothing is unmapped."""
    folder = tmp_path / "idx"
    build_index_folder(acl_store, folder, index_version=bm25_files.INDEX_VERSION, block_docs=300)
    in_ram = bm25_files.load_index(folder)
    monkeypatch.setattr(bm25_files, "MMAP_BYTES", 0)
    monkeypatch.setenv("CITEWISE_MAPPED_INDEX_MB", str(1 << 20))
    roomy = bm25_files.load_index(folder)
    assert in_ram is not None and in_ram.mapped is None  # read into memory: nothing to unmap
    assert roomy is not None and roomy.mapped is not None
    roomy.search("statistical machine translation", 10)
    assert roomy.mapped.trims == 0
    monkeypatch.setenv("CITEWISE_MAPPED_INDEX_MB", "16")  # below what the libraries alone map
    tight = bm25_files.load_index(folder)
    assert tight is not None and tight.mapped is not None
    assert mapped_pages.file_resident_bytes() > 16 * 1024 * 1024
    queries = ["statistical machine translation", "part of speech tagging with a hidden markov model"]
    for _ in range(2):
        assert_same(in_ram, tight, queries)
    assert tight.mapped.trims >= 4
    layered = tight.with_delta([], [int(tight.doc_ids[0])], tight.generation + 1)
    assert layered.mapped is tight.mapped
