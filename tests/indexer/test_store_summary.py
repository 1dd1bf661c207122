"""What the store knows per source (indexer/store_summary.py, ``citewise info``): papers,
abstracts, citation edges and the share that reach a stored paper, citing sentences.

A store written by the test for the counting rules (a paper in two files, a paper that a BibTeX
file and a JSON Lines file both hold, references and citing sentences of one record, a citation
file repeating a pair), and the real samples for the open sources' edges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewise.cli import main
from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store
from citewise.indexer.store_summary import (
    SourceSummary,
    citation_words,
    holdings_words,
    source_kinds,
    sources_words,
    summarize_sources,
    summarize_total,
)

from ..source_samples import read_jsonl, sample

LIB = """@article{alpha2001, title={Alpha Estimators for Sparse Signals}, author={Ames, Ada}, year={2001},
  doi={10.1/a}, abstract={Estimates sparse signals with alpha estimators.}}
@article{beta2002, title={Beta Processes in Topic Models}, author={Bell, Bo}, year={2002}, doi={10.1/b}}
"""
MORE = """@article{alpha2001b, title={Alpha Estimators for Sparse Signals}, author={Ames, Ada}, year={2001},
  doi={10.1/a}}
@article{gamma2003, title={Gamma Corrections for Image Sensors}, author={Gale, Gus}, year={2003}, doi={10.1/c}}
"""
RECORDS = [
    {  # the BibTeX file's gamma2003 (same DOI): its reference list counts for this file, not the .bib
        "id": "p1",
        "doi": "10.1/c",
        "title": "Gamma Corrections for Image Sensors",
        "year": 2003,
        "abstract": "Corrects gamma in image sensors.",
        "references": [
            "10.1/a",
            "10.9/nowhere",
            {"id": "10.1/b", "contexts": ["Beta processes model the topics of each document."]},
        ],
    },
    {
        "id": "p2",
        "doi": "10.1/d",
        "title": "Delta Rules for Online Learning",
        "year": 2004,
        "references": ["10.1/a"],
    },
]
EDGES = (
    "citing\tcited\tcontext\n"
    "x1\t10.1/a\tAlpha estimators recover the signal.\n"
    "x1\t10.1/a\tThe alpha estimator is the standard method.\n"
    "x2\t10.8/none\t\n"
)


@pytest.fixture()
def store(tmp_path: Path) -> Store:
    (tmp_path / "lib.bib").write_text(LIB, encoding="utf-8")
    (tmp_path / "more.bib").write_text(MORE, encoding="utf-8")
    (tmp_path / "papers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    (tmp_path / "edges.tsv").write_text(EDGES, encoding="utf-8")
    s = Store(tmp_path / "s.sqlite")
    names = ("lib.bib", "more.bib", "papers.jsonl", "edges.tsv")
    import_sources(s, [tmp_path / n for n in names] + [sample("s2ag", "abstracts", "abstracts-sample.jsonl")])
    yield s
    s.close()


def test_by_kind_counts_each_paper_once_and_each_edge_where_it_came_from(store: Store) -> None:
    got = {s.kind: s for s in summarize_sources(store)}
    assert got["bibtex"] == SourceSummary("bibtex", "bibtex", files=2, papers=3, abstracts=2)
    # p1 (merged into gamma2003) cites a, a stored nowhere DOI and b; p2 cites a; the citing
    # sentence p1 writes about b repeats its reference list, so it adds a sentence, not an edge.
    assert got["jsonl"] == SourceSummary(
        "jsonl", "jsonl", files=1, papers=2, abstracts=1, edges=4, resolved_edges=3, sentences=1
    )
    # Two sentences of one pair are one edge; the edge to 10.8/none reaches no stored paper.
    assert got["citations"] == SourceSummary(
        "citations", "citations", files=1, edges=2, resolved_edges=1, sentences=2
    )
    assert got["citations"].resolved_share == 0.5 and got["bibtex"].resolved_share is None
    assert got["s2ag-abstracts"].abstracts == 100 and got["s2ag-abstracts"].papers == 0
    assert [s.kind for s in summarize_sources(store)] == ["bibtex", "jsonl", "citations", "s2ag-abstracts"]


def test_by_file_counts_a_paper_in_each_file_that_holds_it(store: Store) -> None:
    got = {Path(s.name).name: s for s in summarize_sources(store, "file")}
    assert (got["lib.bib"].papers, got["lib.bib"].abstracts) == (2, 1)
    assert (got["more.bib"].papers, got["more.bib"].abstracts) == (2, 2)  # gamma's abstract came from p1
    assert got["papers.jsonl"].edges == 4 and got["edges.tsv"].sentences == 2
    assert all(s.files == 1 for s in got.values())


def test_a_store_without_citation_files(tmp_path: Path) -> None:
    (tmp_path / "lib.bib").write_text(LIB, encoding="utf-8")
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [tmp_path / "lib.bib"])
    assert summarize_sources(store) == [SourceSummary("bibtex", "bibtex", files=1, papers=2, abstracts=1)]
    store.close()
    assert summarize_sources(Store(tmp_path / "empty.sqlite")) == []


def test_info_prints_and_returns_the_summary(store: Store, capsys) -> None:
    assert main(["info", "--store", str(store.path), "--json"]) == 0
    by_source = json.loads(capsys.readouterr().out)["by_source"]
    assert by_source["by"] == "kind"
    assert by_source["sources"][2] == {
        "name": "citations",
        "kind": "citations",
        "files": 1,
        "papers": 0,
        "abstracts": 0,
        "edges": 2,
        "resolved_edges": 1,
        "sentences": 2,
        "resolved_share": 0.5,
        "unresolved_references": 1,
    }
    assert main(["info", "--store", str(store.path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[lines.index(next(x for x in lines if x.startswith("sources:"))) + 1].split() == [
        "papers",
        "abstracts",
        "citation",
        "edges",
        "resolved",
        "citing",
        "sentences",
        "kind",
    ]
    rows = [line.split() for line in lines]
    assert ["3", "2", "0", "-", "0", "bibtex", "(2", "files)"] in rows
    assert ["2", "1", "4", "75.0%", "1", "jsonl", "(1", "file)"] in rows
    assert main(["info", "--store", str(store.path), "--by-file"]) == 0
    assert any(
        line.endswith(f"{store.path.parent / 'edges.tsv'}") for line in capsys.readouterr().out.splitlines()
    )


def test_open_source_samples_edges_and_sentences(tmp_path: Path) -> None:
    """The real OpenAlex page (930 references, none to a work of the page) and S2AG citations
    (rows without a cited corpus id are no edge; each context is a sentence)."""
    page = sample("openalex", "works_api_page_peneira_2024.json")
    cites = sample("s2ag", "citations", "citations-sample.jsonl")
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [page, cites])
    got = {s.kind: s for s in summarize_sources(store)}
    works = json.loads(page.read_text(encoding="utf-8"))["results"]
    ids = {w["id"] for w in works}
    refs = [r for w in works for r in dict.fromkeys(w.get("referenced_works") or [])]
    assert (got["openalex"].papers, got["openalex"].edges) == (len(works), len(refs)) == (49, 930)
    assert got["openalex"].resolved_edges == sum(r in ids for r in refs)
    rows = [r for r in read_jsonl(cites) if r["citedcorpusid"] is not None]
    assert got["s2ag-citations"].edges == len({(r["citingcorpusid"], r["citedcorpusid"]) for r in rows})
    assert got["s2ag-citations"].sentences == sum(1 for r in rows for c in r["contexts"] or [] if c.strip())
    # The S2AG papers of the cited corpus ids arrive: the same edges now reach stored papers.
    cited = rows[0]["citedcorpusid"]
    paper = {**read_jsonl(sample("s2ag", "papers", "papers-sample.jsonl"))[0], "corpusid": int(cited)}
    paper["externalids"] = {"CorpusId": str(cited)}
    extra = tmp_path / "papers.jsonl"
    extra.write_text(json.dumps(paper) + "\n", encoding="utf-8")
    import_sources(store, [extra])
    again = {s.kind: s for s in summarize_sources(store)}["s2ag-citations"]
    assert again.resolved_edges == len({r["citingcorpusid"] for r in rows if r["citedcorpusid"] == cited}) > 0
    store.close()


def test_the_whole_store_and_one_import_counted_once_in_the_same_words(store: Store) -> None:
    """``summarize_total``: each paper, reference and pair once across every source (gamma2003 is in
    more.bib and papers.jsonl; p1's citing sentence repeats its reference list), or across the
    files of one import; ``holdings_words`` is the line both ``index`` and ``info`` print."""
    total = summarize_total(store)
    assert total == SourceSummary(
        "all", "all", files=5, papers=4, abstracts=102, edges=6, resolved_edges=4, sentences=3
    )
    assert holdings_words(total) == (
        "4 papers, 102 abstracts, 6 citation edges (4 to papers in the store, 2 unresolved references), "
        "3 citing sentences"
    )
    assert total.counts() == {
        "files": 5,
        "papers": 4,
        "abstracts": 102,
        "citation_edges": 6,
        "resolved_citation_edges": 4,
        "unresolved_references": 2,
        "citing_sentences": 3,
    }
    folder = store.path.parent
    edges = summarize_total(store, only=[str(folder / "edges.tsv")])
    assert citation_words(edges) == (
        "2 citation edges (1 to papers in the store, 1 unresolved reference), 2 citing sentences"
    )
    two = summarize_total(store, only=[str(folder / "papers.jsonl"), str(folder / "more.bib")])
    assert (two.files, two.papers, two.edges, two.resolved_edges, two.sentences) == (2, 3, 4, 3, 1)
    assert summarize_total(store, only=[str(folder / "not-imported.bib")]).counts()["files"] == 0
    assert citation_words(SourceSummary("x", "bibtex", files=1)) == "0 citation edges, 0 citing sentences"


def test_sources_are_said_as_files_of_kinds(store: Store, tmp_path: Path, capsys) -> None:
    """``info`` says files and kinds apart, where "sources: 5" read as five kinds of source; its
    citation line is the store's total in the import summary's words."""
    assert source_kinds(store) == {"bibtex": 2, "citations": 1, "jsonl": 1, "s2ag-abstracts": 1}
    assert sources_words({"openalex": 1}) == "1 file of 1 kind (openalex 1)"
    assert sources_words(source_kinds(Store(tmp_path / "empty.sqlite"))) == "no sources"
    assert main(["info", "--store", str(store.path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["sources"] == 5 and info["source_kinds"] == source_kinds(store)
    assert info["counts"] == summarize_total(store).counts()
    assert main(["info", "--store", str(store.path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "sources:        5 files of 4 kinds (bibtex 2, citations 1, jsonl 1, s2ag-abstracts 1)" in lines
    assert (
        "citations:      6 citation edges (4 to papers in the store, 2 unresolved references), "
        "3 citing sentences"
    ) in lines
