"""BM25 top-k latency: every document scored (the dense path) vs exact dynamic pruning (issue 28).

``BM25Index.search`` takes the pruned path (MaxScore, ``indexer/bm25_topk.py``) where it pays and falls
back to the dense one elsewhere; both return the same list. This bench times the dense path,
``search`` as it is, and the pruned path forced everywhere (what its thresholds were chosen from),
on one query view as the keystroke path builds it (``models/prefetch.py``: the ACM-CR dev citing
sentence with the citing title, the placeholder's own words weighted by ``models/focus.py``),
already tokenised so that only the search is timed. Each query is searched ``--repeats`` times
each way, in turn (so all see the same machine); a query's time is its median over the repeats,
and the summary (median, p95) is over the queries. Every answer is checked against the dense
path's.

    python bench/bench_bm25_topk.py --store STORE [--queries 200] [--repeats 5] [--k 20 1000]

Prints one JSON object, with the machine's load average before and after (2 shared cores: the
figures depend on what else runs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from _common import SHARED_DATA, machine, summary

from citewise.evaluation import protocol as ev
from citewise.indexer import bm25_files, bm25_topk
from citewise.indexer.bm25 import BM25Index
from citewise.indexer.store import Store
from citewise.models.focus import local_weights
from citewise.models.prefetch import view_text


def view_queries(index: BM25Index, n: int, view: str) -> list[Counter[str]]:
    """The first ``n`` ACM-CR dev queries as the prefetch sends view ``view`` to the index, tokenised
    once here (the search itself would tokenise a string on every call)."""
    out: list[Counter[str]] = []
    for q in ev.load_dev_queries(SHARED_DATA / "acm-cr" / "dev", None)[:n]:
        weighted = local_weights(q.query, view_text(q.query, view), index.tokenizer)
        out.append(weighted if isinstance(weighted, Counter) else Counter(index.tokenizer(weighted)))
    return out


def same(pruned: list[tuple[int, float]], dense: list[tuple[int, float]]) -> bool:
    """The same list up to ties: equal scores rank for rank (the pruned path recomputes its scores
    with the dense path's float32 additions, so a document with the score of another is tied
    with it, and the dense path's argpartition may have kept either at the k-th place)."""
    return len(pruned) == len(dense) and all(
        abs(ps - ds) <= 1e-5 * abs(ds) for (_, ps), (_, ds) in zip(pruned, dense, strict=True)
    )


@contextmanager
def always_pruned() -> Iterator[None]:
    """The pruned path wherever it can run (no size, k or work threshold): what the thresholds in
    ``indexer/bm25.py`` were chosen from."""
    names = ("PRUNE_MIN_DOCS", "PRUNE_DOCS_PER_LOOKUP", "PRUNE_MAX_SHARE")
    saved = {name: getattr(bm25_topk, name) for name in names}
    bm25_topk.PRUNE_MIN_DOCS, bm25_topk.PRUNE_DOCS_PER_LOOKUP, bm25_topk.PRUNE_MAX_SHARE = 0, 0, float("inf")
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(bm25_topk, name, value)


def forced_search(index: BM25Index, q: Counter[str], k: int) -> list[tuple[int, float]]:
    with always_pruned():
        return index.search(q, k)


def time_k(index: BM25Index, queries: list[Counter[str]], k: int, repeats: int) -> dict:
    """The dense path, ``search`` as it is (pruned where the thresholds say it pays) and the pruned
    path forced, at depth ``k``: per-query medians over the repeats, summarised over the queries."""
    ways = {
        "exhaustive": lambda q: index._search_exhaustive(q, k),
        "search": lambda q: index.search(q, k),
        "pruned_forced": lambda q: forced_search(index, q, k),
    }
    ms: dict[str, list[list[float]]] = {name: [[] for _ in queries] for name in ways}
    for q in queries:  # warm-up: the pages of a mapped index, the pruned path's scratch vector
        for way in ways.values():
            way(q)
    mismatches = 0
    for _ in range(repeats):
        for i, q in enumerate(queries):
            got = {}
            for name, way in ways.items():
                t = time.perf_counter()
                got[name] = way(q)
                ms[name][i].append(time.perf_counter() - t)
            mismatches += not same(got["search"], got["exhaustive"])
            mismatches += not same(got["pruned_forced"], got["exhaustive"])
    out = {name: summary([statistics.median(x) for x in per_query]) for name, per_query in ms.items()}
    for name in ("search", "pruned_forced"):
        for stat in ("median", "p95"):
            dense, this = out["exhaustive"][f"{stat}_ms"], out[name][f"{stat}_ms"]
            out[f"speedup_{name}_{stat}"] = round(dense / max(this, 1e-9), 2)
    out["queries_search_left_to_dense_path"] = sum(
        index._search_pruned(q, k, None, False) is None for q in queries
    )
    out["answers_differing"] = mismatches
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--k", type=int, nargs="+", default=[20, 1000])
    ap.add_argument("--view", default="local+title", help="the BM25 view (models/prefetch.py)")
    args = ap.parse_args()
    out: dict = {"machine_before": machine()}
    store = Store(args.store, create=False)
    t0 = time.perf_counter()
    index = bm25_files.load_or_build(store)
    queries = view_queries(index, args.queries, args.view)
    out.update(
        {
            "papers": index.size,
            "mapped": type(index.postings).__name__ == "memmap",
            "index_load_s": round(time.perf_counter() - t0, 2),
            "view": args.view,
            "queries": len(queries),
            "mean_query_terms": round(statistics.mean(len(q) for q in queries), 1),
            "repeats": args.repeats,
        }
    )
    for k in args.k:
        out[f"k={k}"] = time_k(index, queries, k, args.repeats)
    out["machine_after"] = machine()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
