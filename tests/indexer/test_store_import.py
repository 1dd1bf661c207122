"""Store and BibTeX importer on small files the tests write: messy input, dedup, idempotence, safety."""

from __future__ import annotations

from pathlib import Path

import pytest

from citewise.indexer.bibtex import iter_bibtex, split_authors
from citewise.indexer.importer import import_sources
from citewise.indexer.records import ImportProblem, PaperRecord
from citewise.indexer.store import SCHEMA_VERSION, Store, StoreError

MESSY = r"""
@string{sigir = "Proceedings of SIGIR"}
@comment{exported by hand}

@inproceedings{10.1145/1.2,
  author = {M{\"u}ller, J{\"o}rg and Garc\'{\i}a, Ana and {Research Group}},
  title = {{{BERT}} for <i>Ranking</i>: $\alpha$-Tests},
  booktitle = sigir,
  year = {2019},
  month = jan,
  doi = {10.1145/1.2},
  abstract = {We study x<sup>2</sup> effects \& more.},
  keywords = {ranking, neural}
}

@article{broken,
  title = {Missing brace,
  year = 2020

@article{good2,
  title = {A Second Paper on Retrieval Evaluation},
  author = {Doe, Jane},
  journal = {Information Retrieval Journal},
  year = 2020
}

@inproceedings{10.1145/3255914,
  title = {Session Details: Session 1A},
  year = {2015},
  doi = {10.1145/3255914}
}

@inproceedings{dupkey,
  title = {Exactly the Same DOI Again},
  doi = {10.1145/1.2},
  year = {2019}
}
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_messy_bibtex_is_cleaned(tmp_path: Path) -> None:
    bib = write(tmp_path / "messy.bib", MESSY)
    items = list(iter_bibtex(bib))
    records = [r for r in items if isinstance(r, PaperRecord)]
    problems = [p for p in items if isinstance(p, ImportProblem)]
    first = records[0]
    assert first.title == "BERT for Ranking: α-Tests"
    assert first.authors == ["Müller, Jörg", "García, Ana", "Research Group"]
    assert first.venue == "Proceedings of SIGIR"
    assert first.abstract == "We study x2 effects & more."
    assert first.extra["month"] == "1"
    assert first.year == 2019 and first.doi == "10.1145/1.2"
    assert first.bibtex.startswith("@inproceedings{10.1145/1.2,")
    broken = [p for p in problems if not p.skipped]
    assert len(broken) == 1
    assert broken[0].source == str(bib) and broken[0].line == 16, str(broken[0])
    assert [p for p in problems if p.skipped][0].line == 27
    assert {r.key for r in records} == {"10.1145/1.2", "good2", "dupkey"}


def test_import_counts_and_dedup(tmp_path: Path) -> None:
    bib = write(tmp_path / "messy.bib", MESSY)
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [bib])
    assert (stats.imported, stats.duplicates, stats.skipped, stats.broken) == (2, 1, 1, 1)
    assert store.count() == 2
    assert store.find(doi="10.1145/1.2").title == "BERT for Ranking: α-Tests"
    # Full-text search finds the cleaned words, accents folded.
    hits = store.fts_search('"muller"', 5, weights=(1, 1, 1))
    assert hits and store.get(hits[0][0]).doi == "10.1145/1.2"


def test_reimport_is_idempotent_and_updates_in_place(tmp_path: Path) -> None:
    bib = write(tmp_path / "lib.bib", MESSY)
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [bib])
    gen = store.generation
    ids = sorted(p.id for p in store.iter_papers())
    again = import_sources(store, [bib])
    assert (again.imported, again.updated, again.unchanged) == (0, 0, 2)
    assert store.generation == gen, "an unchanged re-import must not invalidate derived indexes"
    write(bib, MESSY.replace("A Second Paper on Retrieval Evaluation", "A Second Paper, Revised"))
    changed = import_sources(store, [bib])
    assert (changed.imported, changed.updated) == (0, 1)
    assert sorted(p.id for p in store.iter_papers()) == ids, "ids are stable across updates"
    assert store.find(key="good2").title == "A Second Paper, Revised"
    assert store.fts_search('"revised"', 5)
    assert not store.fts_search('"evaluation"', 5), "the FTS index follows updates"


def test_removed_entries_and_sources_are_dropped(tmp_path: Path) -> None:
    a = write(
        tmp_path / "a.bib",
        "@article{x, title={Shared Paper About Graphs}, year={2001}, doi={10.1/x}}\n"
        "@article{y, title={Only In A}, year={2002}}\n",
    )
    b = write(
        tmp_path / "b.bib", "@article{x2, title={Shared Paper About Graphs}, year={2001}, doi={10.1/X}}\n"
    )
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [a, b])
    assert (stats.imported, stats.duplicates) == (2, 1)
    write(a, "@article{x, title={Shared Paper About Graphs}, year={2001}, doi={10.1/x}}\n")
    stats = import_sources(store, [a])
    assert stats.removed == 1 and store.find(key="y") is None
    assert store.drop_source(str(a.resolve())) == 0, "b still holds the shared paper"
    assert store.count() == 1 and store.find(doi="10.1/x").source == str(b.resolve())
    assert store.drop_source(str(b.resolve())) == 1 and store.count() == 0


def test_dedup_by_arxiv_then_title_year(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    recs = [
        PaperRecord(title="Attention Is All You Need", year=2017, arxiv="arXiv:1706.03762v5", key="a"),
        PaperRecord(title="Attention is all you need!", year=2017, arxiv="1706.03762", key="b"),
        PaperRecord(title="Deep Residual Learning for Image Recognition", year=2016, key="c"),
        PaperRecord(
            title="Deep residual learning for image recognition",
            year=2016,
            doi="10.1109/cvpr.2016.90",
            key="d",
        ),
        PaperRecord(title="Deep residual learning for image recognition", year=2015, key="e"),
    ]
    stats = store.import_source(str(tmp_path / "x.jsonl"), iter(recs), fmt="jsonl")
    assert (stats.imported, stats.duplicates) == (3, 2)
    assert store.find(key="c").doi == "10.1109/cvpr.2016.90", "the duplicate fills the missing DOI"


def test_interrupted_import_leaves_store_unchanged(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.import_source("first", iter([PaperRecord(title="Kept Paper From Before", year=2000)]), fmt="jsonl")

    def exploding():
        yield PaperRecord(title="Half Imported One", year=2001)
        yield PaperRecord(title="Half Imported Two", year=2002)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.import_source("second", exploding(), fmt="jsonl")
    assert [p.title for p in store.iter_papers()] == ["Kept Paper From Before"]
    assert store.fts_search('"half"', 5) == []
    assert [s["path"] for s in store.sources()] == ["first"]


def test_not_a_store_is_a_clear_error(tmp_path: Path) -> None:
    junk = write(tmp_path / "junk.sqlite", "this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="junk.sqlite"):
        Store(junk)
    with pytest.raises(StoreError, match="no paper store"):
        Store(tmp_path / "missing.sqlite", create=False)


def test_schema_version_is_recorded_and_newer_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    store.set_meta("schema_version", "99")
    store.close()
    with pytest.raises(StoreError, match="newer"):
        Store(tmp_path / "s.sqlite")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Smith, John and Doe, Jane", ["Smith, John", "Doe, Jane"]),
        ("{Barnes and Noble} and Smith, A.", ["Barnes and Noble", "Smith, A."]),
        ("Anderson, Sandra AND Brandt, B", ["Anderson, Sandra", "Brandt, B"]),
        ("  ", []),
        ("Oneperson", ["Oneperson"]),
    ],
)
def test_split_authors(value: str, expected: list[str]) -> None:
    assert split_authors(value) == expected


def test_a_broken_entry_never_deletes_the_others(tmp_path: Path) -> None:
    bib = write(
        tmp_path / "lib.bib",
        "@article{a, title={First Paper Kept Safe}, year={2001}}\n"
        "@article{b, title={Second Paper Kept Safe}, year={2002}}\n",
    )
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [bib])
    # The user is mid-edit: entry b now has a syntax error. It must not vanish from the store.
    write(
        bib, "@article{a, title={First Paper Kept Safe}, year={2001}}\n@article{b, title={Second Paper Ke\n"
    )
    stats = import_sources(store, [bib])
    assert stats.broken == 1 and stats.removed == 0
    assert store.find(key="b") is not None


def test_find_keys_matches_find_for_many_keys(tmp_path) -> None:
    """The batched key look-up (a draft's thousands of citations) agrees with one find per key."""
    from citewise.indexer.importer import import_sources
    from citewise.indexer.store import Store

    bib = tmp_path / "lib.bib"
    bib.write_text(
        "".join(
            f"@misc{{k{i},\n  title = {{Paper number {i} on ranking}},\n  year = 2020\n}}\n"
            for i in range(1200)
        )
    )
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [str(bib)])
    keys = [f"k{i}" for i in range(0, 1200, 3)] + ["nope", ""]
    found = store.find_keys(keys)
    assert set(found) == {k for k in keys if k.startswith("k")}
    assert all(found[k].id == store.find(key=k).id for k in found)


def test_anthology_papers_sharing_a_doi_reimport_cleanly(tmp_path: Path) -> None:
    """Two Anthology papers with one DOI (J10-1006 and J10-1008 do) stay two papers, and importing
    their file again finds each by its Anthology id: the DOI found the other paper, and the second
    import failed with "the store is damaged (UNIQUE constraint failed: papers.uid)"."""
    store = Store(tmp_path / "s.sqlite")

    def records(suffix: str) -> list[PaperRecord]:
        return [
            PaperRecord(
                title="Book Review: Narrative Information" + suffix,
                acl_id="J10-1006",
                doi="10.1162/x.1",
                year=2010,
            ),
            PaperRecord(
                title="Last Words: Failure is an Orphan" + suffix,
                acl_id="J10-1008",
                doi="10.1162/x.1",
                year=2010,
            ),
        ]

    store.import_source("J10.xml", iter(records("")), fmt="acl-xml")
    store.import_source("J10.xml", iter(records("")), fmt="acl-xml")
    store.import_source("J10.xml", iter(records(" (revised)")), fmt="acl-xml")
    titles = sorted(p.title for p in store.iter_papers())
    assert titles == [
        "Book Review: Narrative Information (revised)",
        "Last Words: Failure is an Orphan (revised)",
    ]


def test_a_key_defined_twice_reads_like_any_entry() -> None:
    """The parser hands a duplicated key's second entry back unprocessed (enclosing braces kept):
    its authors were one name, "Glater, Rafael and Santos, ...", until it was parsed on its own."""
    from citewise.indexer.bibtex import iter_bibtex_text

    authors = "Glater, Rafael and Santos, Rodrygo L.T. and Ziviani, Nivio"
    text = (
        f"@article{{a, author={{{authors}}}, title={{One}}, year=2017}}\n"
        f"@article{{a, author={{{authors}}}, title={{Two {{BERT}}}}, year=2017}}\n"
    )
    first, second = list(iter_bibtex_text(text, "x.bib"))
    assert isinstance(first, PaperRecord) and isinstance(second, PaperRecord)
    assert first.authors == second.authors == ["Glater, Rafael", "Santos, Rodrygo L.T.", "Ziviani, Nivio"]
    assert (second.title, second.year, second.source_line) == ("Two BERT", 2017, 2)
