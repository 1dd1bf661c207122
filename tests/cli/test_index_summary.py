"""``citewise index``'s summary against ``citewise info``: the same words and numbers for the same
files (papers, citation edges, unresolved references, citing sentences), every skip by its
reason, and a run with nothing new saying what the search index step does and why.

The real samples of ``shared/data`` (skipped with a message when absent) are imported one by one,
each into a fresh store, as a user would; small files written here cover the skips the samples
lack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewise.cli import main
from citewise.indexer.bibtex import SESSION_SKIP
from citewise.indexer.sources.s2ag import NO_ABSTRACT_SKIP, NO_CORPUS_ID_SKIP

from ..conftest import ACM_DL, require
from ..source_samples import sample, write_jsonl

QUIET = ("--no-embed", "--no-search-index", "-q")


class Cli:
    """``citewise`` run in this process, its output read back (pytest's ``capsys``)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def out(self, *args: str) -> str:
        assert main(list(args)) == 0
        return self.capsys.readouterr().out

    def index_json(self, store: Path, *paths: Path) -> dict:
        """``citewise index PATHS --json`` into ``store``: its summary."""
        return json.loads(self.out("index", *map(str, paths), "--store", str(store), "--json", *QUIET))

    def info_json(self, store: Path) -> dict:
        return json.loads(self.out("info", "--store", str(store), "--json"))

    def lines(self, *args: str) -> list[str]:
        return self.out(*args).splitlines()


@pytest.fixture()
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


# (sample, papers, abstracts, citation edges, of them to stored papers, citing sentences)
SAMPLES = [
    (("openalex", "works_api_page_peneira_2024.json"), 49, 46, 930, 0, 0),
    (("crossref", "works_query_ecology_boettiger_20items.jsonl"), 20, 15, 936, 6, 0),
    (("s2ag", "citations", "citations-sample.jsonl"), 0, 0, 77, 0, 44),
    (("unarxive", "arXiv_src_2212_086.jsonl"), 49, 49, 630, 0, 1198),
    (("s2orc", "pdf_parses_v2020-07-05_3papers.jsonl"), 0, 0, 95, 0, 170),
    (("s2ag", "abstracts", "abstracts-sample.jsonl"), 0, 100, 0, 0, 0),
]


@pytest.mark.parametrize(("parts", "papers", "abstracts", "edges", "resolved", "sentences"), SAMPLES)
def test_a_sample_imported_alone_says_what_info_says(
    cli: Cli,
    tmp_path: Path,
    parts: tuple[str, ...],
    papers: int,
    abstracts: int,
    edges: int,
    resolved: int,
    sentences: int,
) -> None:
    """An OpenAlex import said "0 citation edges" where ``info`` showed 930 (reference lists were
    not counted); an S2AG citations file said 94 (rows, one per citing sentence) where ``info``
    said 77 edges. Now both give the counts of the file as ``info`` counts them."""
    path = sample(*parts)
    store = tmp_path / "s.sqlite"
    counts = cli.index_json(store, path)["counts"]
    assert counts == {
        "files": 1,
        "papers": papers,
        "abstracts": abstracts,
        "citation_edges": edges,
        "resolved_citation_edges": resolved,
        "unresolved_references": edges - resolved,
        "citing_sentences": sentences,
    }
    info = cli.info_json(store)
    assert info["counts"] == counts
    (row,) = info["by_source"]["sources"]
    assert (row["edges"], row["resolved_edges"], row["sentences"]) == (edges, resolved, sentences)
    held = next(
        line for line in cli.lines("index", str(path), "--store", str(store), *QUIET) if "held by" in line
    )
    words = held.removeprefix("held by the file: ")
    citations = next(
        line for line in cli.lines("info", "--store", str(store)) if line.startswith("citations:")
    )
    assert words.endswith(citations.removeprefix("citations:").strip())
    assert words.startswith(f"{papers:,} paper{'s' * (papers != 1)}, {abstracts:,} abstract")


def test_s2ag_citations_rows_edges_and_skips(cli: Cli, tmp_path: Path) -> None:
    """The S2AG sample: 100 rows, 23 whose cited paper has no corpus id (skipped, with that
    reason), 94 rows stored (``citations``, kept as it was) that are 77 edges, 44 of their rows
    with a citing sentence."""
    store = tmp_path / "s.sqlite"
    summary = cli.index_json(store, sample("s2ag", "citations", "citations-sample.jsonl"))
    assert (summary["skipped"], summary["citations"]) == (23, 94)
    assert summary["skipped_by_reason"] == {NO_CORPUS_ID_SKIP: 23}
    lines = cli.lines(
        "index", str(sample("s2ag", "citations", "citations-sample.jsonl")), "--store", str(store), *QUIET
    )
    assert f"23 skipped: 23 {NO_CORPUS_ID_SKIP}" in lines
    assert (
        "held by the file: 0 papers, 0 abstracts, 77 citation edges (0 to papers in the store, "
        "77 unresolved references), 44 citing sentences"
    ) in lines


def test_two_samples_in_one_store_are_files_of_kinds(cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    page = sample("openalex", "works_api_page_peneira_2024.json")
    cites = sample("s2ag", "citations", "citations-sample.jsonl")
    counts = cli.index_json(store, page, cites)["counts"]
    assert (counts["files"], counts["papers"], counts["citation_edges"], counts["citing_sentences"]) == (
        2,
        49,
        930 + 77,
        44,
    )
    assert cli.info_json(store)["counts"] == counts
    lines = cli.lines("info", "--store", str(store))
    assert "sources:        2 files of 2 kinds (openalex 1, s2ag-citations 1)" in lines


def test_acm_session_records_are_skipped_by_reason(cli: Cli, tmp_path: Path) -> None:
    """ACM-CR's "Session details" entries (3,653 in the collection) are counted by their reason:
    CHIIR 2016 has 13 among its 77 entries."""
    bib = require(ACM_DL / "chiir" / "chiir-2016.bib")
    summary = cli.index_json(tmp_path / "s.sqlite", bib)
    assert summary["skipped"] == 13 and summary["skipped_by_reason"] == {SESSION_SKIP: 13}
    assert summary["imported"] + summary["duplicates"] == 77 - 13
    assert summary["counts"]["papers"] == summary["imported"]


def test_skips_of_several_kinds_are_counted_apart(cli: Cli, tmp_path: Path) -> None:
    """Written files: a session record in a .bib and S2AG abstract rows without an abstract; the
    summary names each reason with its count, most first."""
    bib = tmp_path / "lib.bib"
    bib.write_text(
        "@inproceedings{s1, title={SESSION DETAILS: Search}}\n"
        "@inproceedings{p1, title={Ranking Papers by Their Citing Sentences}, year={2020}}\n",
        encoding="utf-8",
    )
    rows = [
        {"corpusid": 1, "abstract": "Citing sentences describe the cited paper."},
        {"corpusid": 2, "abstract": None},
        {"corpusid": 3, "abstract": "  "},
    ]
    abstracts = write_jsonl(tmp_path / "abstracts-part.jsonl", rows)
    store = tmp_path / "s.sqlite"
    summary = cli.index_json(store, bib, abstracts)
    assert summary["skipped"] == 3
    assert summary["skipped_by_reason"] == {NO_ABSTRACT_SKIP: 2, SESSION_SKIP: 1}
    lines = cli.lines("index", str(bib), str(abstracts), "--store", str(store), *QUIET)
    assert f"3 skipped: 2 {NO_ABSTRACT_SKIP}, 1 {SESSION_SKIP}" in lines


def test_nothing_new_says_what_the_search_index_step_does(tmp_path: Path, capsys) -> None:
    """A ``citewise index`` with nothing new used to print "0 imported ... 0 files" and then spend
    a minute rebuilding a stale index without a word."""
    bib = tmp_path / "lib.bib"
    bib.write_text(
        "@article{a, title={Alpha Estimators for Sparse Signals}, year={2001}}\n", encoding="utf-8"
    )
    store = str(tmp_path / "s.sqlite")
    assert main(["index", str(bib), "--store", store, "--no-embed"]) == 0
    out = capsys.readouterr().out
    assert "search index: built, 1 paper in" in out and "(none was built for this store yet)" in out
    assert main(["index", "--store", store, "--no-embed", "--json"]) == 0
    out, err = capsys.readouterr()
    assert (
        "citewise: nothing to import (no files named); the search index is up to date: nothing to rebuild"
        in err
    )
    done = json.loads(out)["search_index"]
    assert (done["state"], done["rebuilt"], done["papers"]) == ("up to date", False, 1)
    more = tmp_path / "more.bib"
    more.write_text("@article{b, title={Beta Processes in Topic Models}, year={2002}}\n", encoding="utf-8")
    assert main(["index", str(more), "--store", store, "--no-embed", "--no-search-index"]) == 0
    assert "search index: stale (the store changed since it was built), not rebuilt (--no-search-index)" in (
        capsys.readouterr().out
    )
    assert main(["index", str(bib), "--store", store, "--no-embed"]) == 0  # bib unchanged
    out, err = capsys.readouterr()
    assert (
        "citewise: nothing new to import; the search index is stale (the store changed since it was built): "
        "rebuilding it ..."
    ) in err
    assert (
        "search index: rebuilt, 2 papers in" in out
        and "(it was stale: the store changed since it was built)" in out
    )
    assert "0 imported, 0 updated, 1 unchanged" in out
