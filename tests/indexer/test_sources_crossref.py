"""Crossref works (indexer/sources/crossref.py) on the real sample: the 20 ``message.items`` of a
``/works`` list page, and the list page, single-work response and public-data-file shapes written
from them (the official field spec is beside the sample)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewise.cli import main
from citewise.indexer import citations
from citewise.indexer.importer import ImportError_, expand_sources, import_sources
from citewise.indexer.sources.crossref import jats_to_text, reference_ref
from citewise.indexer.store import Store

from ..source_samples import read_jsonl, sample, write_jsonl

ITEMS = ("crossref", "works_query_ecology_boettiger_20items.jsonl")


def _items() -> list[dict]:
    return read_jsonl(sample(*ITEMS))


def test_works_import_with_plain_abstracts_and_doi_references(tmp_path: Path) -> None:
    items = _items()
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [sample(*ITEMS)])
    assert (stats.imported, stats.broken) == (20, 0)
    assert store.count("abstract != ''") == sum(1 for i in items if i.get("abstract")) == 15
    assert store.count("abstract LIKE '%jats%' OR abstract LIKE 'Abstract %'") == 0
    paper = store.find(doi="10.1111/ele.14024")
    assert paper.title == "The forecast trap" and paper.authors == ["Boettiger, Carl"] and paper.year == 2022
    assert paper.venue == "Ecology Letters" and paper.entry_type == "article"
    assert paper.extra == {"volume": "25", "number": "7", "publisher": "Wiley", "pages": "1655--1664"}
    assert paper.abstract.startswith("Encouraged by decision makers’ appetite for future information")
    # Every reference with a DOI is a citation of that DOI (lower case), in each work.
    for item in items:
        pid = store.find(doi=item["DOI"]).id
        cited = {r for (r,) in store.conn.execute("SELECT cited_ref FROM citations WHERE citing=?", (pid,))}
        dois = {r["DOI"].lower() for r in item.get("reference", []) if "DOI" in r}
        # (an arXiv DataCite DOI cites the preprint by its arXiv id: 10.48550/arxiv.1707.06347 -> 1707.06347)
        assert {d.removeprefix("10.48550/arxiv.") for d in dois} <= cited
    assert store.conn.execute("SELECT count(*) FROM citations").fetchone()[0] == 936
    store.close()


def test_the_response_shapes_give_the_same_works(tmp_path: Path) -> None:
    items = _items()
    page = tmp_path / "page.json"
    page.write_text(json.dumps({"status": "ok", "message-type": "work-list", "message": {"items": items}}))
    single = tmp_path / "single.json"
    single.write_text(json.dumps({"status": "ok", "message-type": "work", "message": items[3]}, indent=1))
    public = write_jsonl(tmp_path / "0.json.gz", [{"items": items[:5]}], gz=True)
    assert [f for _, f in expand_sources([page, single, public])] == ["crossref"] * 3
    for path, n in ((page, 20), (single, 1), (public, 5)):
        store = Store(tmp_path / f"{path.name}.sqlite")
        assert import_sources(store, [path]).imported == n
        assert {p.doi for p in store.iter_papers()} == {
            i["DOI"].lower() for i in (items if n == 20 else items[:n] if n == 5 else [items[3]])
        }
        store.close()


def test_jats_abstracts_become_plain_text() -> None:
    jats = (
        "<jats:title>Abstract</jats:title>\n  <jats:sec><jats:title>Aims</jats:title><jats:p>We test "
        "<jats:italic>E. coli</jats:italic> growth at 37&#x00B0;C.</jats:p></jats:sec><jats:p>It grows.</jats:p>"
    )
    assert jats_to_text(jats) == "Aims We test E. coli growth at 37°C. It grows."
    assert (
        jats_to_text("<jats:title>Abstract" + " " * 50_000 + "x") == "Abstract x"
    )  # no quadratic backtracking


def test_unstructured_references_are_matched_by_title_in_either_order(tmp_path: Path) -> None:
    """A reference with only its text (``Pineau J. , Gordon G. & Thrun S. (2003). Point-based value
    iteration: An anytime algorithm for POMDPs. IJCAI ...``) cites the stored paper of that title,
    whichever was imported first; the text references no stored paper has are counted."""
    text_refs = [
        r
        for i in _items()
        for r in {reference_ref(x) for x in i.get("reference", [])}
        if r.startswith(("ref-text:", "ref-title:"))
    ]
    titles = ("point-based value iteration", "the strategy of model building in population biology")
    naming = [r for r in text_refs if any(t in r.lower() for t in titles)]
    citing_title = next(i["title"][0] for i in _items() if i["DOI"] == "10.1101/055319")
    cited = tmp_path / "cited.bib"
    cited.write_text(
        "@inproceedings{pineau2003,\n  title = {Point-based value iteration: An anytime algorithm for {POMDPs}},\n"
        "  author = {Pineau, Joelle and Gordon, Geoff and Thrun, Sebastian},\n  year = {2003}\n}\n"
        "@article{levins1966,\n  title = {The Strategy of Model Building in Population Biology},\n"
        "  author = {Levins, Richard},\n  year = {1966}\n}\n",
        encoding="utf-8",
    )
    for first, second in ((cited, sample(*ITEMS)), (sample(*ITEMS), cited)):
        store = Store(tmp_path / f"{first.name}.sqlite")
        import_sources(store, [first])
        stats = import_sources(store, [second])
        assert stats.text_references_matched == len(naming) == 5
        assert stats.text_references_unmatched == len(text_refs) - len(naming)
        pineau = store.find(key="pineau2003").id
        found = citations.expansions(store, [pineau])[pineau]
        assert found.texts == [citing_title]  # the citing work's title indexes the cited paper
        store.close()


def test_dois_and_arxiv_ids_inside_reference_text_are_used() -> None:
    assert (
        reference_ref({"unstructured": "Graves A. (2017). Curriculum learning. arXiv:1704.03003v2 [cs]."})
        == "1704.03003"
    )
    assert reference_ref({"unstructured": "Smith J. (2001) A title. doi:10.1000/XYZ.5."}) == "10.1000/xyz.5"
    assert reference_ref({"DOI": "10.48550/arXiv.1706.03762"}) == "1706.03762"
    assert reference_ref({"article-title": "A Structured Reference Without Its DOI"}) == (
        "ref-title:a structured reference without its doi"
    )
    assert reference_ref({"key": "only-a-key"}) == ""


def test_bad_works_and_wrong_responses(tmp_path: Path) -> None:
    items = _items()[:3]
    path = write_jsonl(
        tmp_path / "works.jsonl", [items[0], {**items[1], "title": []}, {**items[2], "reference": "none"}]
    )
    stats = import_sources(Store(tmp_path / "s.sqlite"), [path])
    assert stats.imported == 1
    assert {p.line: p.message for p in stats.problems} == {
        2: "no title",
        3: "'reference' must be a list, not str",
    }
    member = tmp_path / "member.json"
    member.write_text(json.dumps({"status": "ok", "message-type": "member", "message": {"id": 311}}))
    with pytest.raises(ImportError_, match="a Crossref 'member' response; citewise imports Crossref works"):
        expand_sources([member])


def test_citewise_index_on_the_sample(tmp_path: Path, capsys) -> None:
    store = tmp_path / "s.sqlite"
    assert main(["index", str(sample("crossref")), "--store", str(store), "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["imported"] == 20 and summary["files"] == 1 and summary["text_references_unmatched"] > 0
