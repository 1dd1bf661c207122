"""S2ORC (indexer/sources/s2orc.py) on the real samples: the 2020-07 release's 1,000 metadata rows
(papers, ids, outbound citations) and 3 pdf_parses rows (citing sentences of the papers their
bibliography entries link to), the 2019 release's combined rows, and doc2json output refused.

The samples cite few papers of their own (four self-citations), so the tests of resolution build a
small store around a cited paper, and of merging around the citing paper as other sources give it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewise.indexer import citations
from citewise.indexer.importer import ImportError_, expand_sources, import_sources
from citewise.indexer.sources.s2orc import entry_ref
from citewise.indexer.store import Store

from ..source_samples import edges, paper_by_ref, read_jsonl, refs_of, sample, write_jsonl

METADATA = ("s2orc", "metadata_sample_v2020-07-05.jsonl")
PARSES = ("s2orc", "pdf_parses_v2020-07-05_3papers.jsonl")
# 18980380 "Distributionally Robust Counterpart in Markov Decision Processes" cites, as [1],
# 7229756 "Distributionally robust Markov decision processes" (Xu and Mannor 2012).
CITING, CITED = "corpusid:18980380", "corpusid:7229756"


def _span_links(parse: dict) -> set[str]:
    """The corpus ids that the body text's citation spans of one parse link to."""
    entries = parse["bib_entries"]
    return {
        f"corpusid:{entries[s['ref_id']]['link']}"
        for para in parse["body_text"]
        for s in para["cite_spans"]
        if s["ref_id"] in entries and entries[s["ref_id"]]["link"]
    }


def test_metadata_rows_are_papers(tmp_path: Path) -> None:
    rows = read_jsonl(sample(*METADATA))
    assert expand_sources([sample(*METADATA)])[0][1] == "s2orc"
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [sample(*METADATA)])
    assert (stats.imported, stats.duplicates, stats.broken) == (1000, 0, 0)
    counts = {
        column: store.count(f"{column} != ''") for column in ("doi", "arxiv", "abstract", "venue", "acl_id")
    }
    assert (
        counts
        == {
            "doi": sum(bool(r["doi"]) for r in rows),
            "arxiv": sum(bool(r["arxiv_id"]) for r in rows),
            "abstract": sum(bool(r["abstract"]) for r in rows),
            "venue": sum(bool(r["venue"] or r["journal"]) for r in rows),
            "acl_id": 0,
        }
        == {"doi": 587, "arxiv": 36, "abstract": 488, "venue": 738, "acl_id": 0}
    )
    assert store.count("abstract LIKE '%:::%'") == 0  # a structured abstract's breaks
    pid = paper_by_ref(store, CITING)
    paper = store.get(pid)
    assert (paper.title, paper.year, paper.doi, paper.arxiv) == (
        "Distributionally Robust Counterpart in Markov Decision Processes",
        2016,
        "10.1109/tac.2015.2495174",
        "1501.07418",
    )
    assert (
        paper.authors == ["Yu, Pengqian", "Xu, Huan"]
        and paper.venue == "IEEE Transactions on Automatic Control"
    )
    # "mag_id": "2952813233,1849856029,2962850106": three MAG ids, each one the paper answers to.
    assert refs_of(store, pid) == {CITING, "mag:2952813233", "mag:1849856029", "mag:2962850106"}
    # outbound_citations are its citation edges, by corpus id.
    cited = {r for (r,) in store.conn.execute("SELECT cited_ref FROM citations WHERE citing=?", (pid,))}
    outbound = next(r["outbound_citations"] for r in rows if r["paper_id"] == "18980380")
    assert cited == {f"corpusid:{c}" for c in outbound} and CITED in cited and len(cited) == 21
    total = store.conn.execute("SELECT count(*) FROM citations").fetchone()[0]
    assert total == sum(len(set(r["outbound_citations"])) for r in rows) == 3094
    pmc = next(r for r in rows if r["pmc_id"] and r["pubmed_id"])
    assert {f"pmcid:{int(pmc['pmc_id'][3:])}", f"pmid:{pmc['pubmed_id']}"} <= refs_of(
        store, paper_by_ref(store, f"corpusid:{pmc['paper_id']}")
    )
    store.close()


def test_pdf_parses_give_citing_sentences(tmp_path: Path) -> None:
    parses = read_jsonl(sample(*PARSES))
    assert expand_sources([sample(*PARSES)])[0][1] == "s2orc-pdf-parses"
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [sample(*PARSES)])
    assert (stats.imported, stats.broken) == (0, 0) and store.count() == 0  # edges only
    stored = edges(store)
    assert stats.citations == len(stored) == 170
    by_paper = {f"corpusid:{p['paper_id']}": p for p in parses}
    assert {e[0] for e in stored} == set(by_paper)
    for citing, cited, sentence, _, _ in stored:
        assert cited in _span_links(by_paper[citing]) and sentence
    # Each distinct (cited paper, sentence) once; no sentence runs past a full stop.
    assert len({e[:3] for e in stored}) == len(stored)
    first = [e[2] for e in stored if e[:2] == (CITING, CITED)]
    assert "We highlight our contributions by comparing with [1] ." in first
    # "et al." inside a citation span ends no sentence: the span's sentence is whole.
    sentences = {e[2] for e in stored if e[0] == "corpusid:18980463"}
    assert (
        "Recently, substantial progress has been achieved in understanding the molecular basis of how "
        "different subtypes of PRs are specified (Wernet and Desplan 2004; Mikeladze-Dvali et al. 2005a )."
    ) in sentences
    assert not any(s.startswith("2005a )") for s in sentences)
    store.close()


@pytest.mark.parametrize("parses_first", [True, False])
def test_the_cited_paper_gets_the_sentences_in_either_order(tmp_path: Path, parses_first: bool) -> None:
    """The cited paper as S2AG gives it (by corpus id), imported before or after the parses; the
    citing paper's own metadata from the metadata file."""
    row = read_jsonl(sample("s2ag", "papers", "papers-sample.jsonl"))[0]
    row = {
        **row,
        "corpusid": 7229756,
        "title": "Distributionally robust Markov decision processes",
        "externalids": {"CorpusId": "7229756"},
    }
    cited = write_jsonl(tmp_path / "papers.jsonl", [row])
    store = Store(tmp_path / "s.sqlite")
    order = [[sample(*PARSES)], [cited, sample(*METADATA)]]
    for paths in order if parses_first else order[::-1]:
        import_sources(store, paths)
    pid = paper_by_ref(store, CITED)
    found = citations.expansions(store, [pid])[pid]
    assert "We highlight our contributions by comparing with [1] ." in found.texts
    citing = store.get(paper_by_ref(store, CITING))
    assert citing.title in found.texts and found.citing == {f"#{citing.id}"}
    # The metadata's outbound citation resolves to the S2AG paper too.
    assert store.conn.execute(
        "SELECT count(*) FROM citations WHERE citing=? AND cited=?", (citing.id, pid)
    ).fetchone() == (1,)
    store.close()


def test_the_same_paper_from_other_sources_merges(tmp_path: Path) -> None:
    """18980380 as OpenAlex gives it (same DOI, no corpus id) and as S2AG does (same corpus id, no
    DOI): one paper, answering to every id, whatever came first."""
    work = json.loads(sample("openalex", "works_api_page_peneira_2024.json").read_text(encoding="utf-8"))[
        "results"
    ][0]
    work = {
        **work,
        "id": "https://openalex.org/W4000000002",
        "doi": "https://doi.org/10.1109/TAC.2015.2495174",
    }
    work["ids"] = {"openalex": work["id"], "doi": work["doi"]}
    s2 = read_jsonl(sample("s2ag", "papers", "papers-sample.jsonl"))[1]
    s2 = {**s2, "corpusid": 18980380, "externalids": {"CorpusId": "18980380"}}
    others = [write_jsonl(tmp_path / "work.jsonl", [work]), write_jsonl(tmp_path / "s2.jsonl", [s2])]
    for first in (others, [sample(*METADATA)]):
        store = Store(tmp_path / f"s{len(first)}.sqlite")
        for paths in (first, [sample(*METADATA)] if first is others else others):
            import_sources(store, paths)
        assert store.count() == 1000
        pid = paper_by_ref(store, CITING)
        assert {"openalex:W4000000002", CITING, "mag:1849856029"} <= refs_of(store, pid)
        assert store.get(pid).doi == "10.1109/tac.2015.2495174"
        store.close()


def test_the_2019_release_and_doc2json(tmp_path: Path) -> None:
    """Combined rows (metadata beside a GROBID parse whose entries say ``links``) are a paper and its
    citing sentences; doc2json output (a PDF hash for an id, nothing linked) is refused."""
    old = sample("s2orc", "doc2json_tests", "20190928")
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [old, sample("s2orc", "example_paper_2020-05.json")])
    assert (stats.imported, stats.broken) == (4, 0)
    example = json.loads(sample("s2orc", "example_paper_2020-05.json").read_text(encoding="utf-8"))
    pid = paper_by_ref(store, f"corpusid:{example['paper_id']}")
    assert store.get(pid).title == example["metadata"]["title"]
    by_citing = {e[0] for e in edges(store)}
    assert f"corpusid:{example['paper_id']}" in by_citing and len(by_citing) == 4
    assert stats.citations == len(edges(store)) > 50
    newer = sample("s2orc", "doc2json_tests", "20210101")
    with pytest.raises(ImportError_, match="doc2json"):
        expand_sources([next(newer.glob("*.json"))])
    assert expand_sources([newer]) == []  # in a folder: passed over, like a README
    store.close()


def test_entry_refs() -> None:
    assert entry_ref({"title": "x", "link": "7229756"}) == CITED
    assert entry_ref({"links": "25540194,1234"}) == "corpusid:25540194"
    assert entry_ref({"link": None, "other_ids": {"DOI": ["10.1039/C3PP50195G"]}}) == "10.1039/c3pp50195g"
    assert entry_ref({"link": None, "other_ids": {"arXiv": ["1501.07418v2"]}}) == "1501.07418"
    assert entry_ref({"link": None, "other_ids": {"DOI": ["10.48550/arXiv.1706.03762"]}}) == "1706.03762"
    assert entry_ref({"link": None, "other_ids": {}}) == entry_ref({"link": "abc"}) == entry_ref(None) == ""


def test_bad_rows_are_reported_with_their_line(tmp_path: Path) -> None:
    rows = read_jsonl(sample(*METADATA))[:2]
    path = write_jsonl(
        tmp_path / "metadata.jsonl",
        [rows[0], json.dumps(rows[1])[:100], {**rows[1], "title": None}, {**rows[1], "paper_id": "x"}],
    )
    stats = import_sources(Store(tmp_path / "s.sqlite"), [path])
    assert stats.imported == 1
    assert {p.line: p.message.split(":")[0] for p in stats.problems} == {
        2: "invalid JSON",
        3: "no title",
        4: "'paper_id' is not an S2ORC paper id",
    }
    parse = read_jsonl(sample(*PARSES))[0]
    mixed = write_jsonl(tmp_path / "parses.jsonl", [parse, rows[0], {**parse, "paper_id": "x"}])
    stats = import_sources(Store(tmp_path / "p.sqlite"), [mixed])
    assert stats.citations > 10
    assert [(p.line, p.message.split(",")[0].split(":")[0]) for p in stats.problems] == [
        (2, "an S2ORC metadata row"),
        (3, "'paper_id' is not an S2ORC paper id"),
    ]
