"""The own-library protocol (issue 26, item 4) on a small real store: a few ACM-CR BibTeX files.

The citing paper is SIGIR 2020's 10.1145/3397271.3401188 (dev), whose cited papers sit in the
SIGIR 2001/2002, CIKM 2001/2008, ADCS 2016 and TRIR files; SIGIR 2020 brings the citing papers
(blacklisted) into the series, and CHIIR 2016, a venue it does not cite, must never be drawn.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from citewise.evaluation import library as lib
from citewise.evaluation import protocol as ev
from tests.conftest import ACM_BLACKLIST, ACM_DEV, ACM_DL, require

CITING = "10.1145/3397271.3401188"
CITING_XML = "sigir-2020/3397271.3401188.xml"
BIBS = (
    "sigir/sigir-2001.bib",
    "sigir/sigir-2002.bib",
    "sigir/sigir-2020.bib",
    "cikm/cikm-2001.bib",
    "cikm/cikm-2008.bib",
    "adcs/adcs-2016.bib",
    "journals/trir.bib",
    "chiir/chiir-2016.bib",
)


@pytest.fixture(scope="module")
def acm_small(tmp_path_factory: pytest.TempPathFactory):
    """``(folder, store, collection, queries)``: the files above copied and imported, with BM25."""
    require(ACM_DL)
    require(ACM_DEV / CITING_XML)
    from citewise.indexer import bm25_files
    from citewise.indexer.importer import import_sources
    from citewise.indexer.store import Store

    root = tmp_path_factory.mktemp("acm-small")
    for rel in BIBS:
        (root / "acm-dl" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ACM_DL / rel, root / "acm-dl" / rel)
    (root / "dev").mkdir()
    shutil.copy(ACM_DEV / CITING_XML, root / "dev" / Path(CITING_XML).name)
    store = Store(root / "acm.sqlite")
    import_sources(store, [root / "acm-dl"])
    bm25_files.load_or_build(store)
    coll = ev.acmcr_collection(store, ev.load_blacklist(ACM_BLACKLIST))
    queries = ev.load_dev_queries(root / "dev", coll.dois)
    return root, store, coll, queries


def test_venue_series_is_the_file_name_without_its_year() -> None:
    assert lib.venue_series("/x/acm-dl/sigir/sigir-2019.bib") == "sigir"
    assert lib.venue_series("/x/acm-dl/chi-ea/chi-ea-2012.bib") == "chi-ea"
    assert lib.venue_series("/x/acm-dl/journals/tois.bib") == "tois"
    assert lib.venue_series("papers.jsonl", "Proceedings of ACL 2019") == "proceedings of acl"


def test_library_holds_the_cited_papers_and_same_venue_papers(acm_small) -> None:
    root, store, coll, queries = acm_small
    cases = lib.acmcr_libraries(root / "dev", store, coll, queries, size=120, seed=3)
    assert [c.citing for c in cases] == [CITING]
    case = cases[0]
    assert case.queries == queries and len(queries) >= 10
    # Every cited paper the collection holds is in the library, every relevant DOI among them.
    paper = ev.read_citing_paper(root / "dev" / Path(CITING_XML).name)
    cited_dois = {coll.doi_of[pid] for pid in case.cited}
    assert cited_dois == {d for d in paper.refs.values() if d in coll.dois} and len(cited_dois) == 7
    assert set().union(*(q.relevant for q in queries)) <= cited_dois
    # The seeded part: the asked size, disjoint from the cited part, of the cited venues only,
    # no citing paper (blacklisted, or any paper outside the collection), none after 2020.
    assert len(case.others) == 120 and not set(case.others) & set(case.cited)
    papers = store.get_many(case.others)
    assert {lib.venue_series(p.source) for p in papers.values()} <= {"sigir", "cikm", "adcs", "trir"}
    assert not set(case.ids) & coll.excluded
    blacklist = ev.load_blacklist(ACM_BLACKLIST)
    assert not {p.doi for p in store.get_many(case.ids).values()} & blacklist
    assert all((p.year or 0) <= 2020 for p in papers.values())


def test_library_draw_is_seeded_and_per_paper(acm_small) -> None:
    root, store, coll, queries = acm_small
    first = lib.acmcr_libraries(root / "dev", store, coll, queries, size=80, seed=0)[0]
    again = lib.acmcr_libraries(root / "dev", store, coll, queries[:2], size=80, seed=0)[0]
    other = lib.acmcr_libraries(root / "dev", store, coll, queries, size=80, seed=1)[0]
    assert first.others == again.others  # fewer queries of the paper: the same library
    assert first.others != other.others and first.cited == other.cited
    # A size beyond the series' papers takes them all.
    everything = lib.acmcr_libraries(root / "dev", store, coll, queries, size=10**6, seed=0)[0]
    field = lib.acmcr_field(store, coll)
    pool = {pid for s in ("sigir", "cikm", "adcs", "trir") for pid in field.by_series[s]} - set(first.cited)
    assert set(everything.others) == pool


def test_library_store_is_its_own_index(acm_small, tmp_path: Path) -> None:
    root, store, coll, queries = acm_small
    case = lib.acmcr_libraries(root / "dev", store, coll, queries, size=50, seed=0)[0]
    small = lib.build_library_store(store, case.ids, tmp_path / "library.sqlite", "bm25")
    try:
        ids = lib.store_ids(small, "doi")
        assert small.count() == len(case.ids) == len(ids)
        assert set(ids.values()) == {coll.doi_of[pid] for pid in case.ids}
        from citewise.models.recommender import Recommender

        rec = Recommender(small, prefetch_mode="bm25", use_reranker=False)
        assert rec.bm25 is not None and rec.bm25.generation == small.generation
        ranked = [ids[c.paper_id] for c in rec.prefetch(queries[0].query, 1000)]
        assert len(ranked) <= len(case.ids) and set(ranked) <= set(ids.values())
    finally:
        small.close()


@pytest.mark.parametrize("rerank", ["--no-rerank", "--rerank"])
def test_eval_library_end_to_end(acm_small, tmp_path: Path, capsys, rerank: str) -> None:
    from citewise.cli import main

    root, store, _coll, _queries = acm_small
    out = tmp_path / "library.json"
    args = ["eval", "acm-cr", "--protocol", "library", "--library-size", "100", "--limit", "6"]
    args += ["--papers", str(root / "dev"), "--collection", str(root / "acm-dl")]
    args += ["--blacklist", str(ACM_BLACKLIST), "--store", str(store.path), rerank, "-q", "--json", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "| run | R@1 | R@5 | R@10 | MRR | nDCG@10 |" in printed and "library" in printed
    result = json.loads(out.read_text())
    assert list(result)[: len(ev.LIBRARY_KEYS)] == list(ev.LIBRARY_KEYS)
    assert result["queries"] == 6
    assert 0 <= result["R@1"] <= result["R@5"] <= result["R@10"] <= 1
    assert 0 < result["MRR"] <= 1 and result["R@10"] > 0.3  # 107 papers: the cited ones rank high
    libs = result["libraries"]
    assert libs["papers"] == 1 and libs["size_min"] == libs["size_max"] == 107
    assert libs["library_size"] == 100 and libs["seed"] == 0 and result["median_ms"] > 0
    (name,) = result["rows"]
    # A library is embedded and its dense list fused by default (issue 26), and the shipped
    # reranker steps aside over the fused prefetch (its manifest's skip_modes), --rerank or not.
    assert name.startswith("hybrid") and "rerank@" not in name, name
    assert "hybrid" in (getattr(_shipped_reranker(), "manifest", None) or {}).get("skip_modes", ["hybrid"])


def _shipped_reranker():
    from citewise.models.recommender import shipped_second_stage

    return shipped_second_stage()


def test_acl_library_is_the_anthology_without_citing_papers(tmp_path: Path) -> None:
    """ACL: one series (the Anthology), the labelled cited papers, no dev citing paper, no paper
    published after the citing one, nothing without an Anthology id."""
    from citewise.indexer.records import PaperRecord
    from citewise.indexer.store import Store
    from citewise.models.query import ContextQuery

    store = Store(tmp_path / "acl.sqlite")
    ids = ["P13-1001", "P14-1002", "P10-1001", "P10-1002", "W12-0101", "D11-1001", "N15-1001"]
    records = [PaperRecord(f"Paper {a}", acl_id=a, key=a, year=2000 + int(a[1:3])) for a in ids]
    records.append(PaperRecord("Not of the Anthology", key="other", year=2010))
    store.import_source(str(tmp_path / "acl.jsonl"), records, fmt="jsonl")
    pid = dict(store.conn.execute("SELECT acl_id, id FROM papers WHERE acl_id != ''").fetchall())
    q = ContextQuery("parsing with grammars", "Paper P13-1001", "")
    queries = [
        ev.EvalQuery("P13-1001#1", "P13-1001", q, {"P10-1001"}, ""),
        ev.EvalQuery("P13-1001#2", "P13-1001", q, {"P10-1002", "P10-1001"}, ""),
        ev.EvalQuery("P14-1002#3", "P14-1002", q, {"D11-1001"}, ""),
    ]
    citing = {"P13-1001": pid["P13-1001"], "P14-1002": pid["P14-1002"]}
    cases = lib.acl_libraries(store, queries, citing, size=10, seed=0)
    assert [c.citing for c in cases] == ["P13-1001", "P14-1002"]
    assert cases[0].cited == sorted([pid["P10-1001"], pid["P10-1002"]]) and len(cases[0].queries) == 2
    # Left for P13-1001: W12 and D11 (N15 is later; P14 is a citing paper; "other" is no ACL paper).
    assert cases[0].others == sorted([pid["W12-0101"], pid["D11-1001"]])
    assert cases[1].others == sorted([pid["P10-1001"], pid["P10-1002"], pid["W12-0101"]])
    assert lib.acl_libraries(store, queries, citing, size=10, seed=0)[1].others == cases[1].others


def test_two_runs_compared_query_by_query(acm_small, tmp_path: Path, capsys) -> None:
    """``--json`` keeps each query's figures (their mean is the row), and ``eval compare`` tests two
    runs of the same libraries query by query: BM25 alone against the default hybrid."""
    from citewise.cli import main

    root, store, _coll, _queries = acm_small
    args = ["eval", "acm-cr", "--protocol", "library", "--library-size", "100", "--limit", "8", "-q"]
    args += ["--papers", str(root / "dev"), "--collection", str(root / "acm-dl")]
    args += ["--blacklist", str(ACM_BLACKLIST), "--store", str(store.path)]
    bm25, hybrid = tmp_path / "bm25.json", tmp_path / "hybrid.json"
    assert main([*args, "--prefetch", "bm25", "--json", str(bm25)]) == 0
    assert main([*args, "--json", str(hybrid)]) == 0
    a = json.loads(bm25.read_text())
    ((name, per_query),) = a["per_query"].items()
    assert name in a["rows"] and len(per_query) == 8
    assert sum(m["MRR"] for m in per_query.values()) / 8 == pytest.approx(a["MRR"], abs=1e-4)
    capsys.readouterr()
    report = tmp_path / "compare.json"
    assert main(["eval", "compare", str(bm25), str(hybrid), "--rounds", "500", "--json", str(report)]) == 0
    printed = capsys.readouterr().out
    assert "| metric | queries | A | B | B - A |" in printed and "| MRR | 8 |" in printed
    (row,) = json.loads(report.read_text())
    mrr = next(r for r in row["results"] if r["metric"] == "MRR")
    b = json.loads(hybrid.read_text())
    assert mrr["diff"] == pytest.approx(b["MRR"] - a["MRR"], abs=2e-4) and 0 < mrr["p_value"] <= 1


def test_compare_refuses_what_it_cannot_pair(tmp_path: Path, capsys) -> None:
    """One clear line, no traceback, for a file without per-query figures, a missing file, a file
    that is not JSON, one file only, or runs of different queries."""
    from citewise.cli import main

    old, bad, a, b = (tmp_path / n for n in ("old.json", "bad.json", "a.json", "b.json"))
    old.write_text(json.dumps({"queries": 3, "R@10": 0.5, "rows": {}}))
    bad.write_text("{half")
    a.write_text(json.dumps({"per_query": {"bm25, sentence": {"q1": {"MRR": 1.0}}}}))
    b.write_text(json.dumps({"per_query": {"bm25, sentence": {"q2": {"MRR": 1.0}}}}))
    for argv, says in (
        ([str(old), str(old)], f"{old} has no per-query figures"),
        ([str(tmp_path / "nope.json"), str(old)], "cannot read"),
        ([str(bad), str(old)], "is not JSON"),
        ([str(old)], "give two --json files"),
        ([str(a), str(b)], "share no query"),
        ([str(a), str(a), "--rounds", "0"], "too few"),
    ):
        assert main(["eval", "compare", *argv]) == 1
        err = capsys.readouterr().err
        assert err.startswith("citewise: error: eval compare") and says in err and "Traceback" not in err


def test_compare_pairs_rows_by_what_they_measured(tmp_path: Path, capsys) -> None:
    """A ``--protocol both`` run against a ``placeholder`` one: the placeholder rows are paired,
    whatever their order or pipeline; rows that cannot be matched that way pair in order."""
    from citewise.cli import main

    def run(path: Path, rows: dict[str, float]) -> str:
        per_query = {name: {f"q{i}": {"MRR": mrr * (i % 2)} for i in range(6)} for name, mrr in rows.items()}
        path.write_text(json.dumps({"per_query": per_query}))
        return str(path)

    both = run(
        tmp_path / "both.json",
        {"hybrid + teacher@100, sentence": 0.2, "hybrid + teacher@100, placeholder": 1.0},
    )
    ph = run(tmp_path / "ph.json", {"hybrid, placeholder": 0.5})
    report = tmp_path / "r.json"
    assert main(["eval", "compare", ph, both, "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "A has 1 rows, B 2: 1 compared" in out
    ((row,),) = [json.loads(report.read_text())]
    assert (row["a"], row["b"]) == ("hybrid, placeholder", "hybrid + teacher@100, placeholder")
    assert row["results"][0]["diff"] == pytest.approx(0.25)  # (1.0 - 0.5) on half the queries
    other = run(tmp_path / "other.json", {"bm25, library": 0.4})
    assert main(["eval", "compare", other, ph, "--json", str(report)]) == 0
    assert [(r["a"], r["b"]) for r in json.loads(report.read_text())] == [
        ("bm25, library", "hybrid, placeholder")
    ]
