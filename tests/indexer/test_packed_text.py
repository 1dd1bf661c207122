"""Packed BibTeX and extras: byte-exact round trips, the merge that fills an abstract later, and the
upgrade of a version-1 store (plain-text rows, 4 KB pages, abstracts in the full-text index)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from citewise.indexer.importer import import_sources
from citewise.indexer.packed_text import FIXED_DICTIONARY, pack, unpack
from citewise.indexer.store import Store
from citewise.indexer.store_open import PAGE_SIZE
from citewise.indexer.store_schema import MIGRATIONS, split_sql

from ..conftest import ACL_XML, ACM_DL, require

ENTRY = (
    '@inproceedings{smith2020,\n  author = {M{\\"u}ller, J{\\"o}rg},\n  title = {{BERT} for Ranking},\n'
    "  abstract = {We study ranking with ünïcödé and \\emph{more}.},\n  year = 2020,\n}\n"
)


@given(st.text(), st.text(max_size=80), st.text(max_size=300))
def test_any_text_round_trips_with_or_without_row_context(text: str, title: str, abstract: str) -> None:
    assert unpack(pack(text, title, abstract), title, abstract) == text
    assert unpack(pack(text)) == text


def test_plain_text_from_old_rows_passes_through() -> None:
    assert unpack(ENTRY) == ENTRY
    assert unpack(None) == "" and unpack(b"") == "" and pack("") == ""


def test_an_entry_that_repeats_its_abstract_packs_small() -> None:
    abstract = "We study ranking with ünïcödé and \\emph{more}. " * 8
    entry = ENTRY.replace("We study ranking with ünïcödé and \\emph{more}.", abstract)
    packed = pack(entry, "BERT for Ranking", abstract)
    assert len(packed) < len(pack(entry)) < len(entry.encode())
    assert len(packed) < 200


def test_the_dictionary_is_frozen() -> None:
    """Stores on disk depend on these exact bytes: changing them makes old rows unreadable."""
    import hashlib

    assert hashlib.sha256(FIXED_DICTIONARY).hexdigest()[:16] == "af7c41154655acdc"


def test_a_duplicate_that_brings_the_abstract_later_keeps_the_entry_exact(tmp_path: Path) -> None:
    """The merge fills an empty abstract without rewriting the BibTeX; the entry must still unpack."""
    first = "@article{a1,\n  title = {Dense Retrieval at Scale},\n  doi = {10.1/xyz},\n  year = {2021}\n}\n"
    second = (
        "@article{a2,\n  title = {Dense Retrieval at Scale},\n  doi = {10.1/xyz},\n  year = {2021},\n"
        "  abstract = {A long abstract about dense retrieval.}\n}\n"
    )
    (tmp_path / "one.bib").write_text(first + second, encoding="utf-8")
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [tmp_path / "one.bib"])
    (paper,) = list(store.iter_papers())
    assert paper.abstract == "A long abstract about dense retrieval."
    assert paper.bibtex.startswith("@article{a1,") and "doi = {10.1/xyz}" in paper.bibtex


def _version_one_store(path: Path, rows: list[tuple[str, str, str, str, dict]]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in split_sql(MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '1'), ('generation', '0')")
    for uid, title, abstract, bibtex, extra in rows:
        conn.execute(
            "INSERT INTO papers(uid, key, title, abstract, bibtex, extra, authors) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (uid, uid, title, abstract, bibtex, json.dumps(extra), '["Doe, Jane"]'),
        )
    conn.close()


def test_a_version_one_store_is_upgraded_packed_and_compacted(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    rows = [
        (
            f"k{i}",
            f"Paper number {i} on retrieval",
            "An ablation study " * 40,
            ENTRY.replace("smith2020", f"k{i}"),
            {},
        )
        for i in range(300)
    ]
    rows.append(("bare", "A Paper Without Abstract", "", "", {"url": "https://example.org/x"}))
    _version_one_store(path, rows)
    store = Store(path)
    kinds = dict(store.conn.execute("SELECT typeof(bibtex), count(*) FROM papers GROUP BY 1").fetchall())
    assert kinds == {"blob": 300, "text": 1}  # the empty entry stays ''
    assert store.conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    by_key = {p.key: p for p in store.iter_papers()}
    assert by_key["k7"].bibtex == ENTRY.replace("smith2020", "k7")
    assert by_key["bare"].extra == {"url": "https://example.org/x"} and by_key["bare"].bibtex == ""
    # The full-text index was rebuilt over titles and authors, and still follows edits.
    assert [pid for pid, _ in store.fts_search('"without"', 5)] == [by_key["bare"].id]
    assert store.fts_search('"ablation"', 5) == []


def test_real_entries_round_trip_through_a_store(tmp_path: Path) -> None:
    """Real ACM and ACL records: every stored entry comes back byte for byte, and packs small."""
    acm = sorted(require(ACM_DL).rglob("*.bib"))[0]
    acl = sorted(require(ACL_XML).glob("*.xml"))[0]
    store = Store(tmp_path / "real.sqlite")
    import_sources(store, [acm, acl])
    raw = packed = 0
    for (blob, title, abstract), paper in zip(
        store.conn.execute("SELECT bibtex, title, abstract FROM papers ORDER BY id"),
        store.iter_papers(),
        strict=True,
    ):
        assert unpack(blob, title, abstract) == paper.bibtex
        raw += len(paper.bibtex.encode())
        packed += len(blob)
    assert raw and packed < raw / 2
