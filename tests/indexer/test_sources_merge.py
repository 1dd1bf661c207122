"""One paper whatever the source (issue 25): ids from the arXiv snapshot, OpenAlex, S2AG and Crossref
resolve to one stored paper, whatever the order of imports, and the citing sentences S2AG gives
reach it; the ids' spellings; the store's schema upgrade; detection and compressed files.

The records are the real samples' with their ids rewritten to name one paper (the samples were
drawn apart, so no paper is in two of them)."""

from __future__ import annotations

import itertools
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from citewise.indexer import citations
from citewise.indexer.importer import ImportError_, expand_sources, import_sources
from citewise.indexer.sources.ids import canonical_ref
from citewise.indexer.sources.stream import ZSTD_MAGIC
from citewise.indexer.store import SCHEMA_VERSION, Store
from citewise.indexer.store_schema import MIGRATIONS, split_sql

from ..source_samples import edges, paper_by_ref, read_jsonl, refs_of, sample, write_jsonl

DOI = "10.5555/sparsity.2008"
CORPUS_ID = 987654321
W_ID = "W4000000001"


@pytest.fixture(scope="module")
def one_paper(tmp_path_factory) -> dict[str, Path]:
    """The same paper (arXiv 0704.0002, "Sparsity-certifying Graph Decompositions") in four sources,
    and S2AG citation rows that cite it by corpus id."""
    folder = tmp_path_factory.mktemp("one-paper")
    arxiv = read_jsonl(sample("arxiv", "arxiv-metadata-oai-snapshot.first200.jsonl"))[1]
    assert arxiv["id"] == "0704.0002" and not arxiv["doi"]
    work = json.loads(sample("openalex", "works_api_page_peneira_2024.json").read_text(encoding="utf-8"))[
        "results"
    ][0]
    work = {
        **work,
        "id": f"https://openalex.org/{W_ID}",
        "doi": f"https://doi.org/{DOI}",
        "publication_year": 2008,
    }
    work["ids"] = {"openalex": work["id"], "doi": work["doi"], "mag": "2100000001"}
    s2 = read_jsonl(sample("s2ag", "papers", "papers-sample.jsonl"))[0]
    s2 = {**s2, "corpusid": CORPUS_ID, "year": 2009}
    s2["externalids"] = {
        "CorpusId": str(CORPUS_ID),
        "DOI": DOI.upper(),
        "ArXiv": "0704.0002",
        "MAG": "2100000001",
    }
    item = {**read_jsonl(sample("crossref", "works_query_ecology_boettiger_20items.jsonl"))[0], "DOI": DOI}
    rows = [r for r in read_jsonl(sample("s2ag", "citations", "citations-sample.jsonl")) if r["contexts"]][:3]
    rows = [{**r, "citedcorpusid": str(CORPUS_ID)} for r in rows]
    return {
        "arxiv": write_jsonl(folder / "arxiv-snapshot.jsonl", [arxiv]),
        "openalex": write_jsonl(folder / "0000_part_00.gz", [work], gz=True),
        "s2ag": write_jsonl(folder / "papers-part0.jsonl", [s2]),
        "crossref": write_jsonl(folder / "crossref.jsonl", [item]),
        "citations": write_jsonl(folder / "citations-part0.jsonl", rows),
    }


ORDERS = list(itertools.permutations(("arxiv", "openalex", "s2ag", "crossref")))


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
def test_four_sources_are_one_paper_in_any_order(tmp_path: Path, one_paper: dict[str, Path], order) -> None:
    files = [one_paper[name] for name in order]
    # The citation rows come first in half of the orders (before any paper), last in the others.
    files = [one_paper["citations"], *files] if ORDERS.index(order) % 2 else [*files, one_paper["citations"]]
    store = Store(tmp_path / "s.sqlite")
    for path in files:
        import_sources(store, [path])
    assert store.count() == 1
    (paper,) = list(store.iter_papers())
    assert paper.arxiv == "0704.0002" and paper.doi == DOI
    assert {f"openalex:{W_ID}", f"corpusid:{CORPUS_ID}", "mag:2100000001"} <= refs_of(store, paper.id)
    held_by = {
        s for (s,) in store.conn.execute("SELECT source FROM paper_sources WHERE paper_id=?", (paper.id,))
    }
    assert len(held_by) == 4
    sentences = [e[2] for e in edges(store)]
    assert len(sentences) >= 3 and citations.expansions(store)[paper.id].texts[: len(sentences)] == sentences
    # The paper keeps its abstract from whichever source had one, and its references resolve.
    assert paper.abstract
    store.close()


def test_dropping_one_source_keeps_the_merged_paper(tmp_path: Path, one_paper: dict[str, Path]) -> None:
    store = Store(tmp_path / "s.sqlite")
    for name in ("arxiv", "openalex", "s2ag"):
        import_sources(store, [one_paper[name]])
    assert store.count() == 1
    assert store.drop_source(str(one_paper["arxiv"].resolve())) == 0 and store.count() == 1
    assert paper_by_ref(store, f"corpusid:{CORPUS_ID}") == paper_by_ref(store, f"openalex:{W_ID}")
    store.close()


def test_papers_with_different_dois_are_never_merged(tmp_path: Path, one_paper: dict[str, Path]) -> None:
    """An S2 record naming the arXiv id of one paper and the DOI of another, whose DOIs differ, does
    not join them: two DOIs are two works (a preprint DataCite DOI aside, which is an arXiv id)."""
    arxiv = read_jsonl(one_paper["arxiv"])[0]
    other = write_jsonl(tmp_path / "arxiv.jsonl", [{**arxiv, "doi": "10.5555/another-work"}])
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [other, one_paper["openalex"], one_paper["s2ag"]])
    assert store.count() == 2
    store.close()


@pytest.mark.parametrize(
    ("written", "ref"),
    [
        ("https://doi.org/10.7717/PEERJ.4375", "10.7717/peerj.4375"),
        ("doi:10.1/X", "10.1/x"),
        ("10.48550/arXiv.1706.03762", "1706.03762"),
        ("arXiv:cs/0101001v2", "cs/0101001"),
        ("https://openalex.org/W2741809807", "openalex:W2741809807"),
        ("openalex:w42", "openalex:W42"),
        ("CorpusId:215416146", "corpusid:215416146"),
        ("CorpusID: 215416146", "corpusid:215416146"),
        ("MAG:2741809807", "mag:2741809807"),
        ("PMID:29456894", "pmid:29456894"),
        ("https://pubmed.ncbi.nlm.nih.gov/29456894", "pmid:29456894"),
        ("https://www.ncbi.nlm.nih.gov/pmc/articles/PMC5815332/", "pmcid:5815332"),
        ("P18-1001", "P18-1001"),
        ("W11-1502", "W11-1502"),  # an Anthology id, not an OpenAlex one
        ("smith2020", "smith2020"),
        ("corpusid:notanumber", "corpusid:notanumber"),  # not an id: left as written, never merged on
    ],
)
def test_every_id_has_one_spelling(written: str, ref: str) -> None:
    assert canonical_ref(written) == ref


def test_a_citation_file_may_name_papers_by_their_open_source_ids(
    tmp_path: Path, one_paper: dict[str, Path]
) -> None:
    tsv = tmp_path / "edges.tsv"
    tsv.write_text(
        f"citing\tcited\tcontext\nsomeone\tCorpusId:{CORPUS_ID}\tSparse graphs are certified by pebbles.\n"
    )
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [one_paper["s2ag"], tsv])
    pid = paper_by_ref(store, f"corpusid:{CORPUS_ID}")
    assert citations.expansions(store)[pid].texts == ["Sparse graphs are certified by pebbles."]
    store.close()


def test_a_version_3_store_is_upgraded_with_its_edges_kept(tmp_path: Path) -> None:
    path = tmp_path / "v3.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:3]:
        for statement in split_sql(migration):
            conn.execute(statement)
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '3'), ('generation', '0')")
    conn.execute(
        "CREATE TABLE citation_edges (source TEXT NOT NULL, line INTEGER NOT NULL, citing_ref TEXT NOT NULL, "
        "cited_ref TEXT NOT NULL, context TEXT NOT NULL DEFAULT '')"
    )
    conn.execute("INSERT INTO citation_edges VALUES ('e.tsv', 2, 'a', 'b', 'A sentence.')")
    conn.close()
    store = Store(path)
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION) == "7"
    assert store.conn.execute("SELECT * FROM citation_edges").fetchall() == [
        ("e.tsv", 2, "a", "b", "A sentence.", "", None)
    ]
    assert store.conn.execute("SELECT count(*) FROM paper_ids").fetchone() == (0,)
    store.close()


@pytest.mark.parametrize(
    ("parts", "fmt"),
    [
        (("openalex", "works_api_page_peneira_2024.json"), "openalex"),
        (("openalex", "work_W2741809807_2025_b-vitamins.json"), "openalex"),
        (("s2ag", "papers", "papers-sample.jsonl"), "s2ag-papers"),
        (("s2ag", "abstracts", "abstracts-sample.jsonl"), "s2ag-abstracts"),
        (("s2ag", "citations", "citations-sample.jsonl"), "s2ag-citations"),
        (("s2ag", "api_fixtures_danielnsilva", "Paper.json"), "s2-api"),
        (("arxiv", "arxiv-metadata-oai-snapshot.first200.jsonl"), "arxiv"),
        (("crossref", "works_query_ecology_boettiger_20items.jsonl"), "crossref"),
    ],
)
def test_each_sample_is_told_by_its_content(parts: tuple[str, ...], fmt: str) -> None:
    assert expand_sources([sample(*parts)])[0][1] == fmt


def test_zstd_without_its_module_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "0000_part_00.zst"
    path.write_bytes(ZSTD_MAGIC + b"\x00" * 16)
    monkeypatch.setitem(sys.modules, "zstandard", None)  # as if not installed
    with pytest.raises(ImportError_, match=r"Zstandard-compressed .*pip install zstandard"):
        expand_sources([tmp_path])


def test_zstd_files_import_when_the_module_is_there(tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard", reason="the zstandard module is not installed here")
    rows = read_jsonl(sample("arxiv", "arxiv-metadata-oai-snapshot.first200.jsonl"))
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    path = tmp_path / "arxiv.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(data))
    assert import_sources(Store(tmp_path / "s.sqlite"), [path]).imported == 200


def test_an_unknown_file_names_the_formats_citewise_knows(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("some notes\n", encoding="utf-8")
    with pytest.raises(
        ImportError_, match=r"unknown format \(use --format bibtex\|.*\|openalex\|s2ag-papers\|.*\|crossref"
    ):
        expand_sources([notes])
    with pytest.raises(ImportError_, match="unknown format 'nonsense' \\(one of bibtex, .*, arxiv, crossref"):
        import_sources(Store(tmp_path / "s.sqlite"), [notes], fmt="nonsense")
    # A JSON file that is none of the open sources is citewise's own JSON Lines, as before.
    own = tmp_path / "papers.json"
    own.write_text('{"id": "a", "title": "A Paper"}\n', encoding="utf-8")
    assert expand_sources([own]) == [(own.resolve(), "jsonl")]
