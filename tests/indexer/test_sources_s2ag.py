"""Semantic Scholar (indexer/sources/s2ag.py) on the real samples: the Academic Graph's ``papers``,
``abstracts`` and ``citations`` datasets (official samples, early 2023), rows of the later release
shape written from them, and Graph API responses."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from citewise.cli import main
from citewise.indexer import bm25_files, citations
from citewise.indexer.importer import ImportError_, expand_sources, import_sources
from citewise.indexer.store import Store

from ..source_samples import edges, paper_by_ref, read_jsonl, refs_of, sample, write_jsonl

PAPERS = ("s2ag", "papers", "papers-sample.jsonl")
ABSTRACTS = ("s2ag", "abstracts", "abstracts-sample.jsonl")
CITATIONS = ("s2ag", "citations", "citations-sample.jsonl")
API = ("s2ag", "api_fixtures_danielnsilva")


def test_papers_rows_become_papers_with_every_id(tmp_path: Path) -> None:
    rows = read_jsonl(sample(*PAPERS))
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [sample(*PAPERS)])
    assert (stats.imported, stats.broken) == (100, 0) and store.count() == 100
    assert store.count("abstract != ''") == 0  # S2AG ships abstracts in a dataset of their own
    pid = paper_by_ref(store, "corpusid:108228682")
    paper = store.get(pid)
    assert paper.title.startswith("Optimization, characterization and immobilization of alkaline protease")
    assert paper.authors == ["Raid D. Thanoon"] and paper.year == 2018 and paper.key == "corpusid:108228682"
    assert refs_of(store, pid) == {"corpusid:108228682", "mag:2921691074"}
    with_doi = [r for r in rows if r["externalids"]["DOI"]]
    assert store.count("doi != ''") == len(with_doi) == 20
    row = with_doi[0]
    assert paper_by_ref(store, row["externalids"]["DOI"].lower()) == paper_by_ref(
        store, f"corpusid:{row['corpusid']}"
    )
    store.close()


def _papers_for_abstracts(tmp_path: Path, n: int = 5) -> tuple[Path, list[dict]]:
    """Real ``papers`` rows given the corpus ids of the first ``n`` real abstracts (the samples were
    drawn apart, so no abstract has its paper in them)."""
    abstracts = read_jsonl(sample(*ABSTRACTS))[:n]
    rows = []
    for paper, abstract in zip(read_jsonl(sample(*PAPERS)), abstracts, strict=False):
        rows.append(
            {
                **paper,
                "corpusid": abstract["corpusid"],
                "externalids": {"CorpusId": str(abstract["corpusid"])},
            }
        )
    return write_jsonl(tmp_path / "papers.jsonl", rows), abstracts


@pytest.mark.parametrize("abstracts_first", [True, False])
def test_abstracts_join_their_papers_in_either_order(tmp_path: Path, abstracts_first: bool) -> None:
    papers, abstracts = _papers_for_abstracts(tmp_path)
    store = Store(tmp_path / "s.sqlite")
    order = [sample(*ABSTRACTS), papers] if abstracts_first else [papers, sample(*ABSTRACTS)]
    stats = [import_sources(store, [path]) for path in order]
    assert sum(s.abstracts for s in stats) == 100 and sum(s.imported for s in stats) == 5
    for row in abstracts:
        paper = store.get(paper_by_ref(store, f"corpusid:{row['corpusid']}"))
        assert paper.abstract == " ".join(row["abstract"].split())
    # The abstracts reach the search index (the first one's paper is found by its abstract's words).
    first = store.get(paper_by_ref(store, f"corpusid:{abstracts[0]['corpusid']}"))
    index = bm25_files.load_or_build(store)
    assert (
        index.search("endolysins peptidoglycan hydrolase mycolylarabinogalactan esterase", 1)[0][0]
        == first.id
    )
    store.close()


def test_citation_rows_are_edges_with_their_sentences_intents_and_influence(tmp_path: Path) -> None:
    rows = read_jsonl(sample(*CITATIONS))
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [sample(*CITATIONS)])
    resolvable = [r for r in rows if r["citedcorpusid"]]
    expected = sum(max(1, len(r["contexts"] or [])) for r in resolvable)
    assert stats.citations == expected and stats.skipped == len(rows) - len(resolvable) == 23
    assert stats.broken == 0
    stored = edges(store)
    assert len(stored) == expected
    row = next(r for r in resolvable if r["contexts"] and r["isinfluential"])
    mine = [
        e
        for e in stored
        if e[0] == f"corpusid:{row['citingcorpusid']}" and e[1] == f"corpusid:{row['citedcorpusid']}"
    ]
    assert [e[2] for e in mine] == [" ".join(c.split()) for c in row["contexts"]]
    assert {e[3] for e in mine} == {",".join(row["intents"])} and {e[4] for e in mine} == {1}
    store.close()


def test_the_later_release_shape_gives_each_context_its_intents(tmp_path: Path) -> None:
    """Later releases add ``citationid`` and give ``intents`` as one list per context."""
    row = next(
        r for r in read_jsonl(sample(*CITATIONS)) if r["citedcorpusid"] and len(r["contexts"] or []) >= 2
    )
    n = len(row["contexts"])
    later = {
        **row,
        "citationid": 1234567,
        "intents": [["methodology"], None] + [["background", "result"]] * (n - 2),
    }
    path = write_jsonl(tmp_path / "citations-later.jsonl", [later])
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [path])
    assert [e[3] for e in edges(store)] == ["methodology", ""] + ["background,result"] * (n - 2)
    store.close()


@pytest.mark.parametrize("paper_first", [True, False])
def test_citing_sentences_reach_the_cited_paper_in_either_order(tmp_path: Path, paper_first: bool) -> None:
    """The cited paper (a real ``papers`` row given the cited corpus id, among the other 99) is
    indexed by what its citer wrote: the sentence's words find it first, which its own title
    ("Optimization ... of alkaline protease ...") does not contain."""
    rows = read_jsonl(sample(*CITATIONS))
    row = next(r for r in rows if r["contexts"] and r["citedcorpusid"])
    assert "tectonic uplift" in row["contexts"][0]
    papers = read_jsonl(sample(*PAPERS))
    papers[0] = {**papers[0], "corpusid": int(row["citedcorpusid"]), "externalids": {}}
    papers_file = write_jsonl(tmp_path / "papers.jsonl", papers)
    store = Store(tmp_path / "s.sqlite")
    for path in [papers_file, sample(*CITATIONS)] if paper_first else [sample(*CITATIONS), papers_file]:
        import_sources(store, [path])
    pid = paper_by_ref(store, f"corpusid:{row['citedcorpusid']}")
    found = citations.expansions(store)[pid]
    assert found.texts == [" ".join(c.split()) for c in row["contexts"]] and len(found.citing) == 1
    index = bm25_files.load_or_build(store)
    assert index.search("coastal sector tectonic uplift and seaward sliding", 3)[0][0] == pid
    assert index.citing_count([pid]).tolist() == [1]
    store.close()


def test_bad_citation_rows_are_reported_with_their_line(tmp_path: Path) -> None:
    rows = [r for r in read_jsonl(sample(*CITATIONS)) if r["citedcorpusid"]][:4]
    path = write_jsonl(
        tmp_path / "citations.jsonl",
        [
            rows[0],
            "{not json",
            {**rows[1], "citingcorpusid": "abc"},
            {**rows[2], "contexts": "one sentence"},
            rows[3],
        ],
    )
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [path])
    assert {p.line: p.message.split(":")[0] for p in stats.problems} == {
        2: "invalid JSON",
        3: "'citingcorpusid' must be a corpus id",
        4: "'contexts' must be a list of sentences, not str",
    }
    assert stats.citations == len(edges(store)) >= 2
    store.close()


def test_graph_api_citations_need_their_paper_in_the_file_name(tmp_path: Path) -> None:
    """A ``/paper/{id}/citations`` response does not name the paper: named after it, its citing
    sentences (with the intents of each) become edges; named otherwise, its papers import and the
    edges are reported as not imported."""
    item = json.loads(sample(*API, "Citation.json").read_text(encoding="utf-8"))
    named = tmp_path / "CorpusId_14636783.citations.json"
    shutil.copy(sample(*API, "Citation.json"), named)
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [named])
    assert stats.imported == 1 and stats.citations == 4
    citing = paper_by_ref(store, "corpusid:254723237")
    assert (
        store.get(citing).title == "Learning to Throw With a Handful of Samples Using Decision Transformers"
    )
    assert [(e[0], e[1], e[3], e[4]) for e in edges(store)] == [
        ("corpusid:254723237", "corpusid:14636783", c["intents"][0], 1) for c in item["contextsWithIntent"]
    ]
    assert [e[2] for e in edges(store)] == item["contexts"]
    unnamed = tmp_path / "page.json"
    unnamed.write_text(json.dumps({"offset": 0, "data": [item]}), encoding="utf-8")
    stats = import_sources(Store(tmp_path / "t.sqlite"), [unnamed])
    assert stats.imported == 1 and stats.citations == 0
    (problem,) = stats.problems
    assert "CorpusId_" in problem.message and "1 citation(s)" in problem.message
    store.close()


def test_graph_api_references_and_a_paper_with_its_citations(tmp_path: Path) -> None:
    named = tmp_path / "references-of-CorpusID:14636783.json"
    shutil.copy(sample(*API, "Reference.json"), named)
    shutil.copy(sample(*API, "Paper.json"), tmp_path / "Paper.json")
    paper = json.loads(sample(*API, "Paper.json").read_text(encoding="utf-8"))
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [named, tmp_path / "Paper.json"])
    ref_edges = edges(store, named)
    assert [e[:2] for e in ref_edges] == [("corpusid:14636783", "corpusid:1981188")]
    turing = paper_by_ref(store, "corpusid:14636783")
    assert store.get(turing).doi == "10.1093/mind/lix.236.433" and store.get(turing).title == paper["title"]
    reference = json.loads(sample(*API, "Reference.json").read_text(encoding="utf-8"))["citedPaper"]
    # (Six of Turing's "references" are footnotes with no id at all: nothing to import them by.)
    embedded = {c["paperId"] for c in paper["citations"] + paper["references"] if c["paperId"]}
    assert stats.imported == len(embedded | {paper["paperId"], reference["paperId"]}) and stats.broken == 0
    # Papers that cite it (embedded "citations") index it by their titles; its references are its citations.
    assert len(citations.expansions(store, [turing])[turing].citing) == len(paper["citations"])
    cited = store.conn.execute(
        "SELECT count(*) FROM citations WHERE citing=? AND cited IS NOT NULL", (turing,)
    )
    assert cited.fetchone()[0] == len([r for r in paper["references"] if r["paperId"]]) == 8
    store.close()


@pytest.mark.parametrize(
    ("dataset", "what"),
    [("authors", "authors (author records)"), ("paper-ids", "paper-ids"), ("tldrs", "tldrs")],
)
def test_a_dataset_of_the_wrong_kind_says_what_it_is(dataset: str, what: str) -> None:
    path = sample("s2ag", dataset, f"{dataset}-sample.jsonl")
    with pytest.raises(ImportError_, match=re.escape(f"a Semantic Scholar Academic Graph {what}")):
        expand_sources([path])


def test_the_sample_folder_through_the_cli(tmp_path: Path, capsys) -> None:
    """The whole S2AG sample folder: papers, abstracts and citations import, the API responses
    too, and the datasets citewise does not import are passed over."""
    store = tmp_path / "s.sqlite"
    assert main(["index", str(sample("s2ag")), "--store", str(store), "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out)
    formats = sorted(f for _, f in expand_sources([sample("s2ag")]))
    assert formats == ["s2-api"] * 3 + ["s2ag-abstracts", "s2ag-citations", "s2ag-papers"]
    assert summary["abstracts"] == 100 and summary["citations"] >= 100 and summary["imported"] > 1000
