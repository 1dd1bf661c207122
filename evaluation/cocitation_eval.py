"""Leave-one-out measurement of co-citation with the draft's other citations (models/cocitation.py).

Each dev sentence is a query as in ``citewise eval``; the draft's citations are the citing
paper's other references (its references minus the papers the sentence cites), the way a writer
has cited the rest of the draft already. ACM-CR: the XML's reference DOIs in the collection; ACL:
the citing paper's edges in ``acl-citation-edges.tsv`` and ScisummNet (the store never holds them:
the honest split leaves out every edge of a dev paper). The prefetch's candidates are ranked
alone, then with the co-citation list fused as a list (it may add papers) and as a prior (it
reorders what the text found); each run is written as a ``citewise eval --json`` file, so
``citewise eval compare`` tests it query by query.

    python -m citewise.evaluation.cocitation_eval acl --store S --citances C --edges E --out DIR
    python -m citewise.evaluation.cocitation_eval acm-cr --store S --papers P --blacklist B --out DIR
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from citewise.indexer.store import Store
from citewise.models import cocitation
from citewise.models.recommender import Recommender

from . import protocol as ev
from .citances import read_jsonl

VARIANTS: dict[str, tuple[float, bool]] = {  # name -> (RRF weight, prior only)
    "co-cited list": (1.0, False),
    "co-cited prior": (1.0, True),
}


@dataclass
class Dataset:
    queries: list[ev.EvalQuery]
    id_of: dict[int, str]  # store id -> the protocol's id (DOI or Anthology id)
    excluded: set[int]  # outside the collection
    own: dict[str, int]  # citing paper -> its store id (never its own candidate)
    references: dict[str, set[str]]  # citing paper -> every reference, as protocol ids
    # Reference lists of other citing papers to add to the store's graph (ACM-CR's store has no
    # edges: the other dev papers' references are the only citation graph there is), a query's
    # own paper's left out.
    extra_citers: bool = False


def acl_dataset(store: Store, citances: Path, edges: Path) -> Dataset:
    queries, own = ev.load_acl_dev_queries(citances, store)
    citing = {q.citing_doi for q in queries}
    refs: dict[str, set[str]] = {c: set() for c in citing}
    with edges.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["citing"] in refs:
                refs[row["citing"]].add(row["cited"])
    for row in read_jsonl(citances):
        if row["citing"] in refs:
            refs[row["citing"]].add(row["cited"])
    return Dataset(queries, ev.acl_ids(store), set(), own, refs)


def acmcr_dataset(store: Store, papers: Path, blacklist: Path, extra_citers: bool = False) -> Dataset:
    coll = ev.acmcr_collection(store, ev.load_blacklist(blacklist))
    queries = ev.load_dev_queries(papers, coll.dois)
    refs = {}
    for path in sorted(papers.rglob("*.xml")):
        paper = ev.read_citing_paper(path)
        refs[paper.doi] = set(paper.refs.values()) & coll.dois
    return Dataset(queries, coll.doi_of, coll.excluded, {}, refs, extra_citers)


def run(
    rec: Recommender,
    data: Dataset,
    depth: int = 1000,
    rerank: bool = False,
    on_query: Callable[[], None] | None = None,
) -> tuple[dict[str, dict[str, dict[str, float]]], dict]:
    """Per-query metrics of the prefetch alone and of each variant (``rerank``: each list then
    through the query's second stage, as ``Recommender.recommend`` does, the co-citation prior
    fused before it); and how many queries had a draft citation in the store and a co-citation
    list."""
    base = cocitation.graph_of(rec.store)
    pid_of = {v: k for k, v in data.id_of.items() if v}
    graphs = {c: _with_others(base, data, c, pid_of) for c in data.references} if data.extra_citers else {}
    mode = rec.mode()
    rows: dict[str, dict[str, dict[str, float]]] = {name: {} for name in ("prefetch", *VARIANTS)}
    seen = {"queries": 0, "with_draft_citations": 0, "with_list": 0, "graph_edges": len(base)}
    for q in data.queries:
        draft = {pid_of[r] for r in data.references.get(q.citing_doi, set()) - q.relevant if r in pid_of}
        excluded = data.excluded | ({data.own[q.citing_doi]} if q.citing_doi in data.own else set())
        graph = graphs.get(q.citing_doi, base)
        cands = rec.prefetcher(excluded).candidates(q.query, depth, mode)
        listed = [(p, s) for p, s in graph.ranked(draft, depth) if p not in excluded]
        seen["queries"] += 1
        seen["with_draft_citations"] += bool(draft)
        seen["with_list"] += bool(listed)
        rows["prefetch"][q.qid] = _metrics(_staged(rec, q, cands, rerank), data.id_of, q.relevant)
        for name, (weight, only_found) in VARIANTS.items():
            if rerank and not only_found:
                continue  # reranked, the prior alone (the list measured the same at the top)
            fused = cocitation.fuse([_copy(c) for c in cands], listed, weight, only_found=only_found)
            rows[name][q.qid] = _metrics(_staged(rec, q, fused, rerank), data.id_of, q.relevant)
        if on_query is not None:
            on_query()
    return rows, seen


def _with_others(base: cocitation.CitationGraph, data: Dataset, own: str, pid_of: dict[str, int]):
    """``base`` plus the reference lists of every citing paper but ``own`` (the query's)."""
    graph = cocitation.CitationGraph({k: set(v) for k, v in base.refs.items()}, {})
    for citer, targets in graph.refs.items():
        for t in targets:
            graph.citers.setdefault(t, set()).add(citer)
    for citing, refs in data.references.items():
        if citing != own:
            for r in refs:
                if r in pid_of:
                    graph.add(f"dev:{citing}", pid_of[r])
    return graph


def _staged(rec: Recommender, q: ev.EvalQuery, cands: list, rerank: bool) -> list:
    """``cands`` through the query's second stage (none when ``rerank`` is off or it has none),
    with the eval's budget (60 s: the figure must not depend on the machine's load)."""
    stage = rec.stage_for(cands) if rerank else None
    if stage is None:
        return cands
    settings = getattr(stage, "settings", None)
    if settings is not None and hasattr(settings, "budget_s"):
        settings.budget_s = 60.0
    papers = rec.store.get_many([c.paper_id for c in cands])
    return rec.rerank(q.query, [_copy(c) for c in cands], papers, stage)


def _copy(c):
    return type(c)(c.paper_id, c.score, dict(c.sources), dict(c.ranks))


def _metrics(cands: Sequence, id_of: dict[int, str], relevant: set[str]) -> dict[str, float]:
    return ev.query_metrics([id_of.get(c.paper_id, "") for c in cands], relevant)


def write_runs(out: Path, rows: dict, seen: dict, meta: dict) -> None:
    """One ``citewise eval --json``-shaped file per run (``<out>/<run>.json``)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, per_query in rows.items():
        agg = ev.aggregate(list(per_query.values()))
        data = agg | {"rows": {name: agg}, "per_query": {f"{name}, sentence": per_query}, **meta, **seen}
        (out / f"{name.replace(' ', '-')}.json").write_text(json.dumps(data, indent=1) + "\n")
        print(ev.format_table({name: agg}).splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", choices=("acl", "acm-cr"))
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--citances", type=Path)
    ap.add_argument("--edges", type=Path)
    ap.add_argument("--papers", type=Path)
    ap.add_argument("--blacklist", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rerank", action="store_true", help="each list through the query's second stage")
    ap.add_argument(
        "--other-papers-graph",
        action="store_true",
        help="acm-cr: the other dev papers' reference lists as the citation graph (the store has none)",
    )
    args = ap.parse_args(argv)
    store = Store(args.store)
    if args.dataset == "acl":
        data = acl_dataset(store, args.citances, args.edges)
    else:
        data = acmcr_dataset(store, args.papers, args.blacklist, args.other_papers_graph)
    rec = Recommender(store, build_missing=False)
    t0, load = time.perf_counter(), os.getloadavg()
    rows, seen = run(rec, data, rerank=args.rerank)
    rows = {k: v for k, v in rows.items() if v}
    meta = {
        "seconds": round(time.perf_counter() - t0, 1),
        "load": [round(x, 2) for x in load + os.getloadavg()],
    }
    write_runs(args.out, rows, seen, meta)
    print(json.dumps(seen | meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
