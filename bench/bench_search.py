"""BM25 query latency over a store: the in-memory engine vs a plain FTS5 ``bm25()`` OR-query.

Queries are ACM-CR dev citing sentences padded with their citing title to 40 words (the issue's
"40-word query"), top 1000. Prints JSON. Usage:
    python bench/bench_search.py --store PATH [--queries 60] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import time

from _common import SHARED_DATA, machine, summary

from citewise.evaluation import protocol as ev
from citewise.indexer import bm25, bm25_files
from citewise.indexer.store import Store


def forty_words(q: ev.EvalQuery) -> str:
    words = (q.query.local + " " + q.query.citing_title + " " + q.query.citing_abstract).split()
    return " ".join(words[:40])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--skip-fts", action="store_true")
    args = ap.parse_args()
    store = Store(args.store, create=False)
    t0 = time.perf_counter()
    index = bm25_files.load_or_build(store)
    load_s = time.perf_counter() - t0
    queries = [forty_words(q) for q in ev.load_dev_queries(SHARED_DATA / "acm-cr" / "dev", None)][
        : args.queries
    ]
    out: dict = {
        "papers": index.size,
        "queries": len(queries),
        "k": args.k,
        "index_load_s": round(load_s, 2),
        "machine_before": machine(),
    }
    mem = []
    for _ in range(args.repeats):
        for q in queries:
            t = time.perf_counter()
            index.search(q, args.k)
            mem.append(time.perf_counter() - t)
    out["in_memory_bm25"] = summary(mem)
    if not args.skip_fts:
        fts = []
        for q in queries:  # one pass: FTS5 is ~100x slower
            match = bm25.fts_or_query(q)
            t = time.perf_counter()
            store.fts_search(match, args.k, weights=(1.0, 1.0, 0.0))
            fts.append(time.perf_counter() - t)
        out["fts5_bm25"] = summary(fts)
    out["machine_after"] = machine()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
