"""The arXiv metadata snapshot (indexer/sources/arxiv.py) on its real first 200 lines, plus lines of
the same format written here for what they lack (old-style ids, versions, bad lines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewise.cli import main
from citewise.indexer.importer import expand_sources, import_sources
from citewise.indexer.sources.ids import arxiv_id
from citewise.indexer.store import Store

from ..source_samples import read_jsonl, sample, write_jsonl

SNAPSHOT = ("arxiv", "arxiv-metadata-oai-snapshot.first200.jsonl")


def test_the_snapshot_lines_import_with_clean_text_ids_and_categories(tmp_path: Path) -> None:
    rows = read_jsonl(sample(*SNAPSHOT))
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [sample(*SNAPSHOT)])
    assert (stats.imported, stats.broken) == (200, 0) and store.count("abstract != ''") == 200
    assert store.count("doi != ''") == sum(1 for r in rows if r["doi"]) == 117
    assert store.count("arxiv != ''") == 200 and store.count("year = 2007") == 200
    first = store.find(arxiv="0704.0001")
    assert (
        first.title == "Calculation of prompt diphoton production cross sections at Tevatron and LHC energies"
    )
    assert first.authors == ["Balázs, C.", "Berger, E. L.", "Nadolsky, P. M.", "Yuan, C. -P."]  # TeX \'a
    assert first.doi == "10.1103/physrevd.76.013009" and first.venue == "Phys.Rev.D76:013009,2007"
    assert first.entry_type == "article" and first.extra == {"primaryclass": "hep-ph", "categories": "hep-ph"}
    assert first.abstract.startswith(
        "A fully differential calculation in perturbative quantum chromodynamics"
    )
    second = store.find(arxiv="0704.0002")
    assert second.entry_type == "misc" and second.extra["categories"] == "math.CO cs.CG"
    assert "(k,ℓ)-pebble game with colors" in second.abstract  # $(k,\ell)$ as text
    store.close()


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("0704.0001v2", "0704.0001"),
        ("arXiv:2101.00001v3", "2101.00001"),
        ("cs/0101001", "cs/0101001"),
        ("cs/0101001v1", "cs/0101001"),
        ("math.GT/0309136v2", "math/0309136"),
        ("https://arxiv.org/abs/hep-th/9901001", "hep-th/9901001"),
    ],
)
def test_arxiv_ids_with_and_without_versions(given: str, stored: str) -> None:
    assert arxiv_id(given) == stored


def test_old_style_and_versioned_ids_one_paper_each_dated_by_their_first_version(tmp_path: Path) -> None:
    base = read_jsonl(sample(*SNAPSHOT))[1]
    rows = [
        {
            **base,
            "id": "cs/0101001",
            "versions": [{"version": "v1", "created": "Mon, 8 Jan 2001 10:00:00 GMT"}],
        },
        {**base, "id": "0704.0002v2", "versions": []},  # no version list: the id's year-month dates it
        {**base, "id": "hep-th/9901001", "title": "Another paper", "versions": None},
    ]
    path = write_jsonl(tmp_path / "snapshot.jsonl", rows)
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [path])
    assert stats.imported == 3 and stats.duplicates == 0
    assert store.find(arxiv="cs/0101001").year == 2001
    assert store.find(arxiv="0704.0002").year == 2007 and store.find(arxiv="0704.0002").key == "0704.0002"
    assert store.find(arxiv="hep-th/9901001").year == 1999
    store.close()


def test_bad_lines_are_reported_with_their_line(tmp_path: Path) -> None:
    rows = read_jsonl(sample(*SNAPSHOT))[:3]
    path = write_jsonl(
        tmp_path / "arxiv-metadata-oai-snapshot.json",
        [rows[0], {**rows[1], "title": ""}, "\ufeff?", {**rows[2], "authors_parsed": [["Pan", 7]]}, rows[2]],
    )
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [path])
    assert stats.imported == 2
    assert {p.line: p.message for p in stats.problems} == {
        2: "no title",
        3: "invalid JSON: Expecting value (column 1)",
        4: "'authors_parsed' must be a list of [last, first, suffix] lists",
    }
    store.close()


def test_citewise_index_on_the_snapshot_and_its_gzip(tmp_path: Path, capsys) -> None:
    gz = write_jsonl(tmp_path / "arxiv-metadata-oai-snapshot.json.gz", read_jsonl(sample(*SNAPSHOT)), gz=True)
    assert [f for _, f in expand_sources([sample(*SNAPSHOT), gz])] == ["arxiv", "arxiv"]
    store = tmp_path / "s.sqlite"
    assert main(["index", str(gz), "--store", str(store), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["imported"] == 200
    assert main(["index", str(sample(*SNAPSHOT)), "--store", str(store), "--json", "-q"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["imported"] == 0 and again["duplicates"] + again["unchanged"] == 200  # one paper per id
    assert main(["search", "pebble game sparse graphs", "--store", str(store), "--json"]) == 0
    assert "Sparsity-certifying Graph Decompositions" in capsys.readouterr().out


def test_two_broken_lines_at_the_top_do_not_hide_the_rest(tmp_path: Path) -> None:
    """Neither of the first two lines decodes, as in a pretty-printed document: the file is still
    told by its first good line and read line by line, each bad line reported."""
    rows = read_jsonl(sample(*SNAPSHOT))[:3]
    path = write_jsonl(tmp_path / "snapshot.json", ['{"id": "0704.0001", "title": ', "[[[", *rows])
    assert expand_sources([path])[0][1] == "arxiv"
    stats = import_sources(Store(tmp_path / "s.sqlite"), [path])
    assert stats.imported == 3 and [p.line for p in stats.problems] == [1, 2]
