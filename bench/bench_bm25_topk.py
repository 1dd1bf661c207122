"""BM25 top-k latency: ``BM25Index.search`` against the numpy path it replaced (issue 28).

``search`` scores every document with a compiled loop (``indexer/bm25_kernels.py``) past
``COMPILED_MIN_DOCS`` (262,144 documents; numpy below) and selects the top k from a sample's
floor past the same size (``indexer/bm25.py`` ``top_k``). The numpy path is what it was
before: fancy-index scatter-adds (``acc[post] += w * imp``) and an ``argpartition`` of every
score. Both are timed on one query view as the keystroke path builds it (``models/prefetch.py``:
the ACM-CR dev citing sentence with the citing title, the placeholder's own words weighted by
``models/focus.py``), already tokenised so that only the search is timed. Each query is searched
``--repeats`` times each way, in turn (so both see the same machine); a query's time is its median
over the repeats, and the summary (median, p95) is over the queries. Every answer is checked
against the numpy path's (equal scores rank for rank: ties may fall on other documents).

    python bench/bench_bm25_topk.py --store STORE [--queries 200] [--repeats 5] [--k 20 173 1000]

Prints one JSON object, with the machine's load average before and after (2 shared cores: the
figures depend on what else runs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter

import numpy as np
from _common import SHARED_DATA, machine, summary

from citewise.evaluation import protocol as ev
from citewise.indexer import bm25_files
from citewise.indexer.bm25 import BM25Index, numpy_add_impacts
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


def same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> bool:
    """The same list up to ties: equal scores rank for rank (the numpy path's argpartition may
    keep any of the documents tied at the k-th place; ``search`` keeps the first ones)."""
    return len(got) == len(want) and all(
        abs(gs - ws) <= 1e-5 * abs(ws) for (_, gs), (_, ws) in zip(got, want, strict=True)
    )


def numpy_search(index: BM25Index, q: Counter[str], k: int) -> list[tuple[int, float]]:
    """The path before the compiled loop: numpy scatter-adds, then a partition of every score."""
    scores = np.zeros(index.size, dtype=np.float32)
    for term, qtf in q.items():
        tid = index.vocab.get(term)
        if tid is not None:
            lo, hi = int(index.offsets[tid]), int(index.offsets[tid + 1])
            numpy_add_impacts(scores, index.postings, index.impacts, lo, hi, float(qtf))
    part = np.argpartition(-scores, k - 1)[:k]
    order = part[np.lexsort((part, -scores[part]))]
    return [(int(index.doc_ids[i]), float(scores[i])) for i in order if scores[i] > 0]


def time_k(index: BM25Index, queries: list[Counter[str]], k: int, repeats: int) -> dict:
    """``search`` and the numpy path at depth ``k``: per-query medians over the repeats,
    summarised over the queries."""
    ways = {"numpy": lambda q: numpy_search(index, q, k), "search": lambda q: index.search(q, k)}
    ms: dict[str, list[list[float]]] = {name: [[] for _ in queries] for name in ways}
    for q in queries:  # warm-up: the pages of a mapped index, the compiled loop
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
            mismatches += not same(got["search"], got["numpy"])
    out = {name: summary([statistics.median(x) for x in per_query]) for name, per_query in ms.items()}
    for stat in ("median", "p95"):
        out[f"speedup_{stat}"] = round(out["numpy"][f"{stat}_ms"] / max(out["search"][f"{stat}_ms"], 1e-9), 2)
    out["answers_differing"] = mismatches
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--k", type=int, nargs="+", default=[20, 173, 1000])
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
