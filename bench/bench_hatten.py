"""Benchmark of the HAtten prefetch on the ACM-CR store; prints one JSON object.

- ``query_ms``: query embedding + ANN top-200, per query, over the dev queries (median and p95 of
  each run; the reported figure is the median over ``--runs`` runs);
- ``papers_per_s``: embedding throughput of the int8 model on a sample of the store (median over runs),
  with the projected time for the whole store;
- ``loadavg``: the machine's load before and after (2 cores shared with other jobs: read the figures
  with it).

Usage: python bench/bench_hatten.py [--model DIR] [--store .cache/acm.sqlite] [--sample 4000] [--runs 3]
The ANN index of the model is built first when missing (that takes minutes once).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from _common import REPO, SHARED_DATA

DATA = SHARED_DATA / "acm-cr"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(REPO / "models" / "default"))
    ap.add_argument("--store", default=str(REPO / ".cache" / "acm.sqlite"))
    ap.add_argument("--dev", default=str(DATA / "dev"))
    ap.add_argument("--ann-folder")
    ap.add_argument("--sample", type=int, default=4000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    from citewise.indexer.ann import AnnIndex
    from citewise.indexer.store import Store
    from citewise.models import evaluation as ev
    from citewise.models.hatten_onnx import HattenEncoder

    load_before = os.getloadavg()
    store = Store(args.store, create=False)
    enc = HattenEncoder(args.model, threads=args.threads)
    folder = args.ann_folder or f"{args.store}.hatten-{enc.model_hash}"
    ann = AnnIndex(store, enc, folder=folder)
    t0 = time.perf_counter()
    build = ann.build()
    build_s = time.perf_counter() - t0

    queries = [q.query for q in ev.load_dev_queries(args.dev, None)] if Path(args.dev).exists() else []
    if not queries:
        from citewise.models.query import ContextQuery

        queries = [ContextQuery(p.title) for _, p in zip(range(300), store.iter_papers(), strict=False)]
    for q in queries[:20]:  # warm-up
        ann.search(enc.encode_query(q), args.k)
    runs = []
    for _ in range(args.runs):
        lat = []
        for q in queries:
            t = time.perf_counter()
            ann.search(enc.encode_query(q), args.k)
            lat.append((time.perf_counter() - t) * 1000)
        lat.sort()
        runs.append({"median": lat[len(lat) // 2], "p95": lat[int(0.95 * (len(lat) - 1))]})

    ids = [r[0] for r in store.conn.execute("SELECT id FROM papers ORDER BY random() LIMIT ?", (args.sample,))]
    papers = list(store.get_many(ids).values())
    enc.encode_papers(papers[:200])  # warm-up
    rates = []
    for _ in range(args.runs):
        t = time.perf_counter()
        enc.encode_papers(papers)
        rates.append(len(papers) / (time.perf_counter() - t))
    total = store.count()
    rate = statistics.median(rates)
    size = sum(f.stat().st_size for f in Path(args.model).iterdir() if f.is_file())
    out = {
        "model": args.model,
        "model_hash": enc.model_hash,
        "precision": enc.precision,
        "store_papers": total,
        "index": {"exact": ann._index is None, "M": ann.M, "ef": ann.ef, "build": build,
                  "build_seconds": round(build_s, 2)},
        "queries": len(queries),
        "query_ms": {
            "median": round(statistics.median(r["median"] for r in runs), 3),
            "p95": round(statistics.median(r["p95"] for r in runs), 3),
            "runs": [{k: round(v, 3) for k, v in r.items()} for r in runs],
        },
        "papers_per_s": round(rate, 1),
        "papers_per_s_runs": [round(r, 1) for r in rates],
        "projected_store_minutes": round(total / rate / 60, 2),
        "model_folder_mb": round(size / 2**20, 2),
        "threads": args.threads,
        "loadavg": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
        "cpus": os.cpu_count(),
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
