"""Quality from fetched knowledge alone: ACL dev sentences ranked from a store that ``citewise fetch
--around`` built around the citing paper's seed half, with the fetched citing sentences (contexts)
and without them; and, for the yardstick, what the shared citation files lift on the same queries
in a store of the whole Anthology. Prints JSON.

Why: the citing sentences are what the fetch brings that no metadata dump does; the question is
whether they lift the ranking of a draft's sentences at least as much as the shared citation files
lift it today. Both sides follow one honest split: the simulated APIs serve nothing of the dev years
(2013-2014: not their papers, edges or sentences, so no queried sentence), and both stores keep no
edge whose citing paper is of 2013 or later (the simulator still serves 2015's papers citing older
ones; they are dropped from the fetched stores as ``evaluation/honest_split.py`` drops them from the
citation files).

- fetched: for each sampled dev paper (the coverage bench's sample rule: dev papers with four or
  more references the API can know), its references cut in half (seeded), the first half written as
  a ``.bib`` and fetched one hop (``citewise fetch --around``, unthrottled simulator) into a new
  store; the draft's own record (title, abstract: what the writer has) added so the queries carry
  it, as ``citewise eval`` reads it from the store. "without contexts" is a copy of that store with
  every edge's sentence and intents blanked (pairs kept once): the same papers and edges.
- reference: the Anthology XML store (``citewise index`` of the XML), and a copy with
  ``acl-citation-edges.tsv`` and ``scisummnet-citances.jsonl`` imported under the honest split.

Each store is ranked by ``citewise eval acl-citances --prefetch bm25 --no-rerank`` over the
sampled papers' dev sentences; queries are paired by (citing paper, sentence) and compared with
the paired randomization test of ``evaluation/paired.py``. A query whose cited paper the fetched
store lacks counts 0 on both fetched sides ("all queries"), and is also left out ("in store").

    python bench/bench_fetch_quality.py --papers 60 --base /path/acl.sqlite --out quality.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fetch import (  # noqa: E402
    CITEWISE,
    dev_papers,
    fetch_command,
    fetch_env,
    knowable_refs,
    run_fetch,
    split_half,
    write_bib,
)
from fetch_simulator import DATA, Graph, SimConfig, Simulator, load_graph  # noqa: E402

from citewise.evaluation.citances import is_acl_dev, load_citances, read_jsonl  # noqa: E402
from citewise.evaluation.honest_split import honest_split  # noqa: E402
from citewise.evaluation.paired import paired_test  # noqa: E402
from citewise.indexer import bm25_files  # noqa: E402
from citewise.indexer.citations import import_citation_file  # noqa: E402
from citewise.indexer.records import PaperRecord  # noqa: E402
from citewise.indexer.store import Store  # noqa: E402

CITANCES = DATA / "citations" / "scisummnet-citances.jsonl"
EDGES = DATA / "citations" / "acl-citation-edges.tsv"
XML = DATA / "acl-anthology" / "xml"
METRICS = ("R@10", "MRR")


# -- the stores -----------------------------------------------------------------------------------------
def copy_store(src: Path, dst: Path) -> Path:
    """A consistent copy through SQLite's backup (the WAL folded in)."""
    for suffix in ("", "-wal", "-shm"):
        Path(str(dst) + suffix).unlink(missing_ok=True)
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    a.backup(b)
    a.close()
    b.close()
    return dst


def add_draft(path: Path, graph: Graph, acl: str) -> None:
    """The draft's own record (what its writer has: title, abstract), as the Anthology store holds
    it; ``citewise eval`` reads a query's global context from it and never ranks it for itself."""
    p = graph.papers[acl]
    record = PaperRecord(
        p.title, p.abstract, list(p.authors), p.year, p.venue, "inproceedings", key=acl, acl_id=acl
    )
    store = Store(path)
    try:
        store.import_source("draft", [record], fmt="jsonl", sync=False)
    finally:
        store.close()


def drop_later_citers(path: Path) -> int:
    """Drop edges whose citing paper is of 2013 or later (the simulator serves 2015's): the honest
    split of the reference store. Returns how many went."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            cur = conn.execute(
                "DELETE FROM citation_edges WHERE citing_ref IN (SELECT i.ref FROM paper_ids i "
                "JOIN papers p ON p.id = i.paper_id WHERE p.year >= 2013)"
            )
        return cur.rowcount
    finally:
        conn.close()


def strip_contexts(src: Path, dst: Path) -> Path:
    """The same store without the fetched contexts: sentences and intents blanked, each pair once."""
    copy_store(src, dst)
    conn = sqlite3.connect(dst)
    try:
        with conn:
            conn.execute("UPDATE citation_edges SET context = '', intents = ''")
            conn.execute(
                "DELETE FROM citation_edges WHERE rowid NOT IN "
                "(SELECT min(rowid) FROM citation_edges GROUP BY citing_ref, cited_ref)"
            )
    finally:
        conn.close()
    return dst


def build_index(path: Path) -> None:
    """The BM25 index beside the store (its citing-sentence view included), as ``citewise index``."""
    store = Store(path)
    try:
        bm25_files.load_or_build(store, allow_delta=False)
    finally:
        store.close()


# -- ranking --------------------------------------------------------------------------------------------
def write_citances(path: Path, papers: set[str]) -> Path:
    """The ScisummNet rows of ``papers`` (their dev sentences: the queries)."""
    rows = [r for r in read_jsonl(CITANCES) if r["citing"] in papers]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def query_keys(citances: Path) -> dict[str, str]:
    """``citewise eval``'s query ids of a citances file -> (citing paper, sentence): the pairing key
    across files, whose numbering differs."""
    return {
        f"{c.citing}#{n}": f"{c.citing}\t{c.text}" for n, c in enumerate(load_citances(citances, dev=True), 1)
    }


def evaluate(store: Path, citances: Path, out: Path) -> dict[str, dict[str, float]]:
    """``citewise eval acl-citances`` (BM25 prefetch, no second stage) on ``store``: per query key."""
    cmd = [
        str(CITEWISE), "eval", "acl-citances", "--store", str(store), "--citances", str(citances),
        "--collection", str(XML), "--prefetch", "bm25", "--no-rerank", "--json", str(out), "-q",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        if "no dev-split sentence cites a paper of the store" in proc.stderr:
            return {}
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip()[-800:]}")
    keys = query_keys(citances)
    (rows,) = json.loads(out.read_text())["per_query"].values()
    return {keys[q]: {m: v[m] for m in METRICS} for q, v in rows.items()}


# -- one draft: fetched, with and without contexts --------------------------------------------------------
def contexts_of(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {
            " ".join(c.split())
            for (c,) in conn.execute("SELECT context FROM citation_edges WHERE context != ''")
        }
    finally:
        conn.close()


def fetched_one(graph: Graph, sims: tuple[Simulator, Simulator], acl: str, work: Path, args) -> dict:
    """Fetch one hop around the seed half of ``acl``; rank its dev sentences with and without the
    fetched contexts."""
    s2, oa = sims
    seeds, _held = split_half(knowable_refs(graph, s2.view, acl), args.seed, acl)
    folder = work / acl.replace(".", "-")
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "row.json"  # a run stopped and started again (same --work) reuses finished papers
    if done.exists():
        return json.loads(done.read_text())
    store = folder / "fetched.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(str(store) + suffix).unlink(missing_ok=True)
    bib = write_bib(folder / "draft.bib", graph, seeds)
    extra = ["--limit", str(args.limit)]
    summary = run_fetch(fetch_command(bib, store, throttled=False, extra=extra), fetch_env(s2, oa))
    if "error" in summary or not store.exists():  # nothing fetched: its queries count 0
        row = {"paper": acl, "error": summary.get("error") or "no store"}
        done.write_text(json.dumps(row), encoding="utf-8")
        return row
    dropped = drop_later_citers(store)
    add_draft(store, graph, acl)
    bare = strip_contexts(store, folder / "no-contexts.sqlite")
    build_index(store)
    build_index(bare)
    citances = write_citances(folder / "citances.jsonl", {acl})
    dev_texts = {" ".join(r["text"].split()) for r in read_jsonl(citances)}
    sentences = contexts_of(store)
    row = {
        "paper": acl,
        "seeds": len(seeds),
        "sentences": len(sentences),
        "queried_sentences_in_store": len(sentences & dev_texts),
        "later_citer_edges_dropped": dropped,
        "with": evaluate(store, citances, folder / "with.json"),
        "without": evaluate(bare, citances, folder / "without.json"),
    }
    done.write_text(json.dumps(row), encoding="utf-8")
    return row


# -- the reference: the Anthology with and without the shared citation files -------------------------------
def reference(args, work: Path, sample: list[str]) -> dict:
    """The Anthology store without and with the citation files (honest split), ranked on the
    sample's queries (and, with ``--all-dev``, on every dev query)."""
    done = work / "reference.json"
    if done.exists():
        return json.loads(done.read_text())
    base = work / "acl-base.sqlite"
    if args.base:
        copy_store(args.base, base)
    elif not base.exists():
        cmd = [
            str(CITEWISE),
            "index",
            str(XML),
            "--store",
            str(base),
            "--no-embed",
            "--no-search-index",
            "-q",
        ]
        subprocess.run(cmd, check=True, capture_output=True)
    cited = copy_store(base, work / "acl-cited.sqlite")
    store, keep, kept = Store(cited), honest_split(CITANCES).keep, {}
    try:
        for path in (EDGES, CITANCES):
            kept[path.name] = import_citation_file(store, path, keep=keep)
    finally:
        store.close()
    build_index(base)
    build_index(cited)
    sets = {"sample": write_citances(work / "sample-citances.jsonl", set(sample))}
    if args.all_dev:
        sets["all_dev"] = CITANCES
    out: dict = {"edges_kept": kept}
    for name, citances in sets.items():
        out[name] = {
            "without": evaluate(base, citances, work / f"{name}-base.json"),
            "with": evaluate(cited, citances, work / f"{name}-cited.json"),
        }
    done.write_text(json.dumps(out), encoding="utf-8")
    return out


# -- the figures -------------------------------------------------------------------------------------------
def paired(a: dict[str, dict], b: dict[str, dict]) -> dict:
    """``b`` against ``a`` on the queries both ranked: means, mean difference, its 95% interval
    and the paired randomization test's p-value, for R@10 and MRR."""
    out = {}
    for m in METRICS:
        r = paired_test({k: v[m] for k, v in a.items()}, {k: v[m] for k, v in b.items()}, metric=m)
        out[m] = {
            "queries": r.queries,
            "without": round(r.mean_a, 4),
            "with": round(r.mean_b, 4),
            "lift": round(r.diff, 4),
            "ci95": [round(r.ci_low, 4), round(r.ci_high, 4)],
            "p": round(r.p_value, 4),
            "queries_better_worse": [r.b_better, r.a_better],
        }
    return out


def lifts(without: dict[str, dict], with_: dict[str, dict]) -> dict[str, dict[str, float]]:
    return {k: {m: with_[k][m] - without[k][m] for m in METRICS} for k in without.keys() & with_.keys()}


def _of(rows: dict[str, dict], papers: set[str]) -> dict[str, dict]:
    """The queries (keyed citing paper, tab, sentence) of ``papers``."""
    return {k: v for k, v in rows.items() if k.split("\t", 1)[0] in papers}


def summarize(rows: list[dict], ref: dict) -> dict:
    """Fetched with vs without contexts (queries in the store; all queries, a missing one 0), the
    reference lift on the same papers' queries, and the two lifts compared query by query."""
    zero = dict.fromkeys(METRICS, 0.0)
    papers = {r["paper"] for r in rows}
    base, cited = _of(ref["sample"]["without"], papers), _of(ref["sample"]["with"], papers)
    fw = {k: v for r in rows if "with" in r for k, v in r["with"].items()}
    fo = {k: v for r in rows if "without" in r for k, v in r["without"].items()}
    all_w, all_o = ({k: d.get(k, zero) for k in base} for d in (fw, fo))
    out = {
        "fetched_in_store": paired(fo, fw),
        "fetched_all_queries": paired(all_o, all_w),
        "reference_sample": paired(base, cited),
    }
    if "all_dev" in ref:
        out["reference_all_dev"] = paired(ref["all_dev"]["without"], ref["all_dev"]["with"])
    # b = the contexts' lift, a = the citation files' lift: b better means the target is met there
    out["contexts_lift_vs_files_lift"] = paired(lifts(base, cited), lifts(all_o, all_w))
    for v in out["contexts_lift_vs_files_lift"].values():
        v["files_lift"], v["contexts_lift"] = v.pop("without"), v.pop("with")
        v.pop("lift")
    return out


def figures(sample: list[str], work: Path) -> dict:
    """The figures from what earlier runs left in ``work``: the sample's finished papers (those
    with a ``row.json``; a partial run says how many) and the reference."""
    rows = [
        json.loads(f.read_text()) for a in sample if (f := work / a.replace(".", "-") / "row.json").exists()
    ]
    ref = json.loads((work / "reference.json").read_text())
    return {
        "papers_sampled": len(sample),
        "papers_measured": len(rows),
        "papers": [r["paper"] for r in rows],
        "fetch_failed": [r for r in rows if "error" in r],
        "median_sentences_a_store": sorted(r.get("sentences", 0) for r in rows)[len(rows) // 2],
        "queried_sentences_in_fetched_stores": sum(r.get("queried_sentences_in_store", 0) for r in rows),
        "later_citer_edges_dropped": sum(r.get("later_citer_edges_dropped", 0) for r in rows),
        "reference_edges_kept": ref["edges_kept"],
        "figures": summarize(rows, ref),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--papers", type=int, default=60, help="dev papers in the sample")
    ap.add_argument("--limit", type=int, default=500, help="citewise fetch --limit (its default)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--base", type=Path, default=None, help="an Anthology XML store (default: built)")
    ap.add_argument("--all-dev", action="store_true", help="also rank every dev query on the reference")
    ap.add_argument("--work", type=Path, default=None, help="folder for the stores (default: temporary)")
    ap.add_argument(
        "--parts",
        default="fetched,reference,summary",
        help="any of fetched, reference, summary (each reuses what an earlier run left in --work)",
    )
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = ap.parse_args()
    graph = load_graph(DATA)
    t0, out = time.perf_counter(), {"command": " ".join(sys.argv), "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-fetch-quality-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        cfg, parts = SimConfig(data=DATA), args.parts.split(",")
        with Simulator(cfg, graph=graph) as s2, Simulator(cfg, graph=graph) as oa:
            pool = [a for a in dev_papers(graph) if len(knowable_refs(graph, s2.view, a)) >= 4]
            sample = sorted(random.Random(args.seed).sample(pool, min(args.papers, len(pool))))
            if "fetched" in parts:
                for acl in sample:
                    fetched_one(graph, (s2, oa), acl, work, args)
        assert all(is_acl_dev(a) for a in sample)
        if "reference" in parts:
            reference(args, work, sample)
        if "summary" in parts:
            out.update(figures(sample, work))
    out["seconds"] = round(time.perf_counter() - t0)
    out["load_after"] = os.getloadavg()
    out["uptime"] = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    text = json.dumps(out, indent=1)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
