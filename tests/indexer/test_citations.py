"""Citation files (``indexer/citations.py``): import, document expansion, the count prior, leakage.

Small files written by the tests for the logic; the shared ACL Anthology XML and citation edges
for the real-data path (skipped when ``../shared/data`` is absent)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from citewise.cli import main
from citewise.indexer import bm25_files, citations
from citewise.indexer.bm25 import BM25Index, BM25Params
from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store
from citewise.models.citation_prior import reach_depth, with_citation_prior
from citewise.models.prefetch import Prefetcher, PrefetchSettings
from citewise.models.query import Candidate, ContextQuery

from ..conftest import ACL_XML, REPO, SHARED_DATA, require

PAPERS = [  # JSON Lines papers: "id" is the key that citation files name them by
    {"id": "tnt", "title": "TnT: A Statistical Part-of-Speech Tagger", "year": 2000},
    {"id": "crf", "title": "Conditional Random Fields for Sequence Labeling", "year": 2001},
    {"id": "hmm", "title": "A Statistical Part-of-Speech Tagger for Sequences", "year": 1999},
    {"id": "user1", "title": "Parsing Morphologically Rich Languages", "year": 2010},
    {"id": "user2", "title": "Word Alignment for Low-Resource Translation", "year": 2011},
]
EDGES = (
    "citing\tcited\tcontext\n"
    "user1\ttnt\tWe tag the corpus with a second order Markov model tagger.\n"
    "user2\ttnt\t\n"
    "user2\tcrf\tLabels are predicted by a linear-chain model.\n"
)


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    papers = tmp_path / "papers.jsonl"
    papers.write_text("".join(json.dumps(p) + "\n" for p in PAPERS), encoding="utf-8")
    edges = tmp_path / "edges.tsv"
    edges.write_text(EDGES, encoding="utf-8")
    return papers, edges


def _pid(store: Store, key: str) -> int:
    return store.conn.execute("SELECT id FROM papers WHERE key=?", (key,)).fetchone()[0]


def test_index_imports_citation_edges_and_expands_the_cited_papers(tmp_path: Path, files, capsys) -> None:
    papers, edges = files
    store_path = tmp_path / "s.sqlite"
    assert main(["index", str(papers), str(edges), "--store", str(store_path), "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["imported"] == len(PAPERS) and summary["citations"] == 3
    assert main(["info", "--store", str(store_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["citation_edges"] == 3
    store = Store(store_path)
    found = citations.expansions(store)
    tnt = found[_pid(store, "tnt")]
    # The citing sentence, and each citing paper's title once.
    assert tnt.texts == [
        "We tag the corpus with a second order Markov model tagger.",
        "Parsing Morphologically Rich Languages",
        "Word Alignment for Low-Resource Translation",
    ]
    assert len(tnt.citing) == 2 and len(found[_pid(store, "crf")].citing) == 1
    assert _pid(store, "hmm") not in found  # cited by nobody
    # The citing field makes the sentence's words find the paper whose title lacks them.
    index = bm25_files.load_or_build(store)
    assert index.search("second order Markov model", 3)[0][0] == _pid(store, "tnt")
    assert index.citing_count([_pid(store, "tnt"), _pid(store, "hmm"), 10**6, -1]).tolist() == [2, 0, 0, 0]
    assert BM25Index.from_store(store, BM25Params(w_citing=0.0)).search("second order Markov model", 3) == []
    store.close()


def test_drop_forgets_the_edges_of_a_citation_file(tmp_path: Path, files, capsys) -> None:
    papers, edges = files
    store_path = tmp_path / "s.sqlite"
    assert main(["index", str(papers), str(edges), "--store", str(store_path), "-q"]) == 0
    assert main(["index", "--drop", str(edges), "--store", str(store_path), "--json", "-q"]) == 0
    capsys.readouterr()
    store = Store(store_path)
    assert citations.expansions(store) == {}
    assert bm25_files.load_or_build(store).search("second order Markov model", 3) == []
    store.close()


@pytest.mark.parametrize(
    "text, where",
    [
        (EDGES + "user1\n", ":5:"),  # a line without its cited column
        ("from\tto\nuser1\ttnt\n", ":1:"),  # no citing/cited header
    ],
)
def test_a_bad_citation_file_is_one_error_and_nothing_of_it_is_kept(
    tmp_path: Path, files, capsys, text: str, where: str
) -> None:
    papers, _ = files
    bad = tmp_path / "bad.tsv"
    bad.write_text(text, encoding="utf-8")
    store_path = tmp_path / "s.sqlite"
    assert main(["index", str(papers), "--store", str(store_path), "-q"]) == 0
    capsys.readouterr()
    assert main(["index", str(bad), "--store", str(store_path), "-q", "--format", "citations"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"bad.tsv{where}" in err[0] and "nothing of this file was imported" in err[0]
    store = Store(store_path)
    assert citations.expansions(store) == {}
    assert str(bad.resolve()) not in {s["path"] for s in store.sources()}
    store.close()


def test_json_lines_citation_records_are_recognised(tmp_path: Path, files) -> None:
    papers, _ = files
    records = tmp_path / "citances.jsonl"
    records.write_text(
        json.dumps({"citing": "user1", "cited": ["tnt", "hmm"], "text": "Taggers help parsing."}) + "\n",
        encoding="utf-8",
    )
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [papers, records])
    assert (stats.imported, stats.citations) == (len(PAPERS), 2)
    found = citations.expansions(store)
    assert found[_pid(store, "hmm")].texts == [
        "Taggers help parsing.",
        "Parsing Morphologically Rich Languages",
    ]
    store.close()


def test_without_citations_the_index_is_plain_bm25(tmp_path: Path, files) -> None:
    """A store that knows no citations (ACM-CR's) ranks exactly as before: the citing field and the
    prior are no-ops."""
    papers, _ = files
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [papers])
    on = BM25Index.from_store(store, BM25Params(w_citing=1.0))
    off = BM25Index.from_store(store, BM25Params(w_citing=0.0))
    assert np.allclose(on.impacts, off.impacts) and not on.citing_counts.any()
    store.close()


def test_the_prior_reorders_near_ties_by_citation_count() -> None:
    counts = {1: 0, 2: 40, 3: 3, 4: 0}
    fused = [Candidate(1, 0.0330), Candidate(2, 0.0325), Candidate(3, 0.0320), Candidate(4, 0.0100)]
    out = with_citation_prior(fused, lambda ids: [counts[i] for i in ids], 0.5, 60.0)
    assert [c.paper_id for c in out] == [2, 3, 1, 4]  # 2 gains 0.5/61, 3 gains 0.5/62
    assert out[0].ranks["citations"] == 1 and out[0].sources["citations"] == 40.0
    assert [c.paper_id for c in with_citation_prior(list(fused), lambda ids: [1] * len(ids), 0.0)] == [
        1,
        2,
        3,
        4,
    ]


@pytest.mark.parametrize("k", [1, 10, 20, 40])
def test_no_paper_below_the_reach_depth_enters_the_top_k(k: int) -> None:
    """One RRF list of 1,000 papers: the paper just below ``reach_depth`` never enters the top k,
    whatever its count and with every paper above it uncited; one a rank or two above it can (the
    bound is tight), so the keystroke path loses nothing by ranking only that deep."""
    depth = reach_depth(k, 1.0, 0.5, 60.0)
    assert depth is not None and k <= depth < 1000

    def top_with_most_cited_at(rank: int) -> list[int]:
        fused = [Candidate(r, 1.0 / (60.0 + r)) for r in range(1, 1001)]
        counts = {r: (10**6 if r == rank else 0) for r in range(1, 1001)}
        out = with_citation_prior(fused, lambda ids: [counts[i] for i in ids], 0.5, 60.0)
        return [c.paper_id for c in out[:k]]

    assert depth + 1 not in top_with_most_cited_at(depth + 1)
    assert depth == k or any(r in top_with_most_cited_at(r) for r in (depth, depth - 1, depth - 2))


def test_reach_depth_without_a_bound() -> None:
    assert reach_depth(20, 1.0, 0.0) == 20  # no prior: the answer's own depth
    assert reach_depth(100, 1.0, 0.5) is None  # the prior can lift any paper past the 100th
    assert reach_depth(20, 2.0, 0.5) < reach_depth(20, 1.0, 0.5)  # a heavier list is harder to pass


def test_the_prior_through_the_prefetch_on_a_tiny_store(tmp_path: Path, files) -> None:
    """Two papers share most of the sentence's words; the uncited one shares one more and leads
    without the prior. With it, the paper that two others cite leads."""
    papers, edges = files
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [papers, edges])
    index = BM25Index.from_store(store, BM25Params(w_citing=0.0))
    query = ContextQuery("a statistical part-of-speech tagger for sequences")
    ranked = {}
    for weight in (0.0, 0.5):
        prefetcher = Prefetcher(index, None, PrefetchSettings(prior_weight=weight, prf_docs=0))
        ranked[weight] = [c.paper_id for c in prefetcher.candidates(query, 3, "bm25")]
    assert ranked[0.0][0] == _pid(store, "hmm") and ranked[0.5][0] == _pid(store, "tnt")
    store.close()


def _acl_store_module():
    spec = importlib.util.spec_from_file_location(
        "acl_expanded_store", REPO / "bench" / "acl_expanded_store.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_real_acl_edges_expand_tnt_without_dev_year_citers(tmp_path: Path) -> None:
    """The shared ACL edges and ScisummNet sentences, as the evaluation store imports them: TnT
    (A00-1031, no abstract in the XML) gets sentences that say what it is, and nothing written by
    a citing paper of the dev years (2013, 2014) -- neither an edge nor a sentence."""
    require(ACL_XML)
    edges = require(SHARED_DATA / "citations" / "acl-citation-edges.tsv")
    citances = require(SHARED_DATA / "citations" / "scisummnet-citances.jsonl")
    store = Store(tmp_path / "acl.sqlite")
    import_sources(store, [ACL_XML / "A00.xml"])
    not_dev = _acl_store_module().not_dev
    for path in (edges, citances):
        assert citations.import_citation_file(store, path, keep=not_dev) > 0
    years = {
        row[0] for row in store.conn.execute("SELECT DISTINCT substr(citing_ref, 2, 2) FROM citation_edges")
    }
    assert "13" not in years and "14" not in years
    tnt = store.conn.execute("SELECT id, abstract FROM papers WHERE acl_id='A00-1031'").fetchone()
    text = citations.expansions(store, [tnt[0]])[tnt[0]].text
    assert not tnt[1] and "TnT" in text and "tagger" in text
    dev_sentences = [
        json.loads(line)["text"] for line in citances.open(encoding="utf-8") if '"cited": "A00-1031"' in line
    ]
    dev_sentences = [s for s in dev_sentences if s in text]
    assert dev_sentences  # the training years' sentences are in
    for line in citances.open(encoding="utf-8"):
        row = json.loads(line)
        if row["cited"] == "A00-1031" and row["citing"][1:3] in ("13", "14"):
            assert row["text"] not in text, row
    store.close()


def test_real_acl_eval_smoke_expansion_beats_plain_bm25(tmp_path: Path) -> None:
    """The evaluation of ``docs/citation-expansion.md`` on a small real store (the ANLP 2000 volume,
    dev-year citers left out): the dev sentences that cite its papers rank them better with the
    expansion and the prior than without."""
    require(ACL_XML)
    edges = require(SHARED_DATA / "citations" / "acl-citation-edges.tsv")
    citances = require(SHARED_DATA / "citations" / "scisummnet-citances.jsonl")
    store = Store(tmp_path / "acl.sqlite")
    import_sources(store, [ACL_XML / "A00.xml"])
    not_dev = _acl_store_module().not_dev
    for path in (edges, citances):
        citations.import_citation_file(store, path, keep=not_dev)
    spec = importlib.util.spec_from_file_location("eval_exp", REPO / "bench" / "eval_citation_expansion.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.run("acl", store, ["baseline", "+both"])
    assert result["baseline"]["queries"] == result["+both"]["queries"] > 0
    assert result["+both"]["MRR"] > result["baseline"]["MRR"]
    store.close()


def test_edges_imported_before_their_paper_reach_it_through_the_index_delta(tmp_path: Path, files) -> None:
    """Ids are matched when the index is built: a paper imported after the edges that cite it gets
    its citing text, through the BM25 delta (what the language server does after a .bib edit)."""
    papers, edges = files
    rest = tmp_path / "rest.jsonl"
    rest.write_text("".join(json.dumps(p) + "\n" for p in PAPERS if p["id"] != "tnt"), encoding="utf-8")
    late = tmp_path / "late.jsonl"
    late.write_text(json.dumps(PAPERS[0]) + "\n", encoding="utf-8")
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [rest, edges])
    assert bm25_files.load_or_build(store).citing_counts.sum() == 1  # user2 -> crf; tnt not stored yet
    import_sources(store, [late])
    index = bm25_files.load_or_build(store)
    assert index.delta_size == 1  # served as a delta, not rebuilt
    assert index.search("second order Markov model", 3)[0][0] == _pid(store, "tnt")
    assert index.citing_count([_pid(store, "tnt")]).tolist() == [2]
    store.close()


def test_json_lines_papers_give_their_references_contexts(tmp_path: Path, files) -> None:
    """A JSON Lines paper whose references carry the sentences that cite them (``contexts``; also
    Semantic Scholar's ``citedPaper`` shape): the cited papers are indexed by those sentences, and
    a re-import with other sentences replaces them."""
    papers, _ = files
    citing = tmp_path / "citing.jsonl"

    def write(sentence: str) -> None:
        record = {
            "id": "survey",
            "title": "A Survey of Taggers",
            "references": [
                {"id": "tnt", "contexts": [sentence]},
                {"citedPaper": {"paperId": "crf"}, "contexts": ["Linear-chain models label sequences."]},
                "hmm",
            ],
        }
        citing.write_text(json.dumps(record) + "\n", encoding="utf-8")

    write("Trigram taggers remain strong baselines.")
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [papers, citing])
    found = citations.expansions(store)
    tnt, crf, hmm = (_pid(store, k) for k in ("tnt", "crf", "hmm"))
    assert found[tnt].texts == ["Trigram taggers remain strong baselines.", "A Survey of Taggers"]
    assert found[crf].texts == ["Linear-chain models label sequences.", "A Survey of Taggers"]
    assert found[hmm].texts == ["A Survey of Taggers"] and len(found[tnt].citing) == 1  # one citer
    write("Averaged perceptrons tag fast.")
    import_sources(store, [citing])
    assert citations.expansions(store)[tnt].texts[0] == "Averaged perceptrons tag fast."
    assert bm25_files.load_or_build(store).search("averaged perceptrons", 3)[0][0] == tnt
    store.close()


def test_a_paper_cited_once_barely_moves() -> None:
    """One citation is little evidence of popularity: in a small store it must not carry a paper
    past the one the sentence matches best, where fifty citations may."""
    for cited, moves in ((1, False), (50, True)):
        fused = [Candidate(1, 0.0330), Candidate(2, 0.0300)]
        out = with_citation_prior(fused, lambda ids, n=cited: [0 if i == 1 else n for i in ids], 0.5, 60.0)
        assert (out[0].paper_id == 2) is moves, cited
