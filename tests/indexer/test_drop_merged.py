"""``citewise index --drop`` takes a dropped source's own fields off the papers other sources keep.

The reproduction of the bad-input report: one paper held by a ``.bib`` entry (its owner, with the
user's key), an OpenAlex work (OpenAlex, MAG and PubMed ids), an arXiv record (an arXiv id) and a
Crossref work, all with the same DOI, made from the real samples. Dropping the ``.bib``, the
OpenAlex and the arXiv files must leave the paper as Crossref gave it: no key, arXiv id or
OpenAlex id that only the dropped files gave; and the next import of the Crossref file rewrites
its text from Crossref's record, to the very row a store of Crossref alone holds.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from citewise.cli import main

from ..conftest import SHARED_DATA, require

SAMPLES = SHARED_DATA / "samples"
DOI = "10.1111/ele.14024"  # "The forecast trap", the first work of the Crossref sample
KEY = "boettiger2022forecast"
COLUMNS = "uid, key, doi, arxiv, acl_id, title, abstract, authors, year, venue, bibtex, source"


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    crossref = require(SAMPLES / "crossref" / "works_query_ecology_boettiger_20items.jsonl")
    work = json.loads(crossref.read_text(encoding="utf-8").splitlines()[0])
    assert work["DOI"] == DOI
    page = json.loads(require(SAMPLES / "openalex" / "works_api_page_peneira_2024.json").read_text())
    oa = dict(page["results"][0], doi=f"https://doi.org/{DOI}", title="The forecast trap")
    oa["ids"] = dict(oa["ids"], doi=oa["doi"])
    arxiv_sample = SAMPLES / "arxiv" / "arxiv-metadata-oai-snapshot.first200.jsonl"
    arx = dict(
        json.loads(require(arxiv_sample).read_text().splitlines()[0]), doi=DOI, title="The forecast trap"
    )
    out = {
        "bib": tmp_path / "mine.bib",
        "openalex": tmp_path / "openalex.jsonl",
        "arxiv": tmp_path / "arxiv.jsonl",
        "crossref": tmp_path / "crossref.jsonl",
    }
    out["bib"].write_text(
        f"@article{{{KEY},\n  title = {{The forecast trap}},\n  doi = {{{DOI}}},\n  year = {{2022}}\n}}\n"
    )
    out["openalex"].write_text(json.dumps(oa) + "\n")
    out["arxiv"].write_text(json.dumps(arx) + "\n")
    out["crossref"].write_text(json.dumps(work) + "\n")
    return out


def _index(*argv: str) -> None:
    assert main(["index", *argv, "-q", "--no-embed", "--no-search-index"]) == 0


def _paper(store: Path) -> tuple[dict, set[str], int]:
    conn = sqlite3.connect(store)
    try:
        rows = conn.execute(f"SELECT id, {COLUMNS} FROM papers").fetchall()
        assert len(rows) == 1, rows
        pid, *values = rows[0]
        refs = {r for (r,) in conn.execute("SELECT ref FROM paper_ids WHERE paper_id=?", (pid,))}
        sources = conn.execute("SELECT count(*) FROM paper_sources WHERE paper_id=?", (pid,)).fetchone()[0]
    finally:
        conn.close()
    row = dict(zip([c.strip() for c in COLUMNS.split(",")], values, strict=True))
    row["bibtex"] = "" if not row["bibtex"] else "<entry>"
    row["source"] = Path(row["source"]).name
    return row, refs, sources


def test_drop_takes_the_dropped_sources_fields_off_a_kept_paper(
    files: dict[str, Path], tmp_path: Path
) -> None:
    alone = tmp_path / "crossref-alone.sqlite"
    _index(str(files["crossref"]), "--store", str(alone))
    expected, expected_refs, _ = _paper(alone)

    store = tmp_path / "s.sqlite"
    for name in ("bib", "openalex", "arxiv", "crossref"):  # the .bib first: it owns the paper
        _index(str(files[name]), "--store", str(store))
    merged, merged_refs, held = _paper(store)
    assert held == 4 and merged["key"] == KEY and merged["arxiv"] == "0704.0001"
    assert "openalex:W2068311567" in merged_refs  # what the drop must take away, present before it

    drops = [arg for name in ("bib", "openalex", "arxiv") for arg in ("--drop", str(files[name]))]
    _index(*drops, "--store", str(store))
    kept, kept_refs, held = _paper(store)
    assert held == 1 and kept["source"] == "crossref.jsonl"
    assert kept["key"] == expected["key"] and KEY not in kept["key"]
    assert kept["arxiv"] == expected["arxiv"] == "" and kept["doi"] == DOI
    assert kept_refs == expected_refs, kept_refs ^ expected_refs
    assert kept["bibtex"] == ""  # the user's entry went with the .bib

    _index(str(files["crossref"]), "--store", str(store))  # the owner's file again: its own text
    again, again_refs, _ = _paper(store)
    assert again == expected and again_refs == expected_refs
