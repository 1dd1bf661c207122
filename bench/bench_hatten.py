"""Benchmark of a dense prefetch model (HAtten, bi-encoder, static) on the ACM-CR store; prints one JSON object.

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
from typing import TYPE_CHECKING

from _common import REPO, SHARED_DATA

if TYPE_CHECKING:
    from citewise.indexer.ann import AnnIndex
    from citewise.indexer.store import Store
    from citewise.models.hatten_onnx import HattenEncoder
    from citewise.models.query import ContextQuery

DATA = SHARED_DATA / "acm-cr"


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)

    from citewise.indexer.ann import AnnIndex
    from citewise.indexer.store import Store
    from citewise.models.dense_index import make_encoder

    load_before = os.getloadavg()
    store = Store(args.store, create=False)
    enc = make_encoder(Path(args.model))  # HAtten, the bi-encoder or the static encoder (manifest "kind")
    folder = args.ann_folder or f"{args.store}.hatten-{enc.model_hash}"
    ann = AnnIndex(store, enc, folder=folder)
    t0 = time.perf_counter()
    build = ann.build()
    build_s = time.perf_counter() - t0
    queries = _queries(args.dev, store)
    runs = _time_queries(ann, enc, queries, args.k, args.runs)
    rates = _time_embedding(store, enc, args.sample, args.runs)
    total = store.count()
    rate = statistics.median(rates)
    size = sum(f.stat().st_size for f in Path(args.model).iterdir() if f.is_file())
    out = {
        "model": args.model,
        "model_hash": enc.model_hash,
        "precision": getattr(enc, "precision", None) or enc.manifest.get("precision", "int8"),
        "store_papers": total,
        "index": {
            "exact": ann._index is None,
            "M": ann.M,
            "ef": ann.ef,
            "build": build,
            "build_seconds": round(build_s, 2),
        },
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
        "loadavg": {
            "before": [round(x, 2) for x in load_before],
            "after": [round(x, 2) for x in os.getloadavg()],
        },
        "cpus": os.cpu_count(),
    }
    print(json.dumps(out, indent=2))
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(REPO / "models" / "static"))
    ap.add_argument("--store", default=str(REPO / ".cache" / "acm.sqlite"))
    ap.add_argument("--dev", default=str(DATA / "dev"))
    ap.add_argument("--ann-folder")
    ap.add_argument("--sample", type=int, default=4000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    return ap.parse_args(argv)


def _queries(dev: str, store: Store) -> list[ContextQuery]:
    """The dev queries, or (without the ACM-CR dev set, e.g. on another store) the titles of the
    first 300 papers: the latency of a query depends on its length, not on its relevance."""
    from citewise.evaluation import protocol as ev

    queries = [q.query for q in ev.load_dev_queries(dev, None)] if Path(dev).exists() else []
    if not queries:
        from citewise.models.query import ContextQuery

        queries = [ContextQuery(p.title) for _, p in zip(range(300), store.iter_papers(), strict=False)]
    return queries


def _time_queries(
    ann: AnnIndex, enc: HattenEncoder, queries: list[ContextQuery], k: int, n_runs: int
) -> list[dict[str, float]]:
    """Median and p95 milliseconds of query embedding + ANN top-``k``, per run, after 20 warm-up
    queries (the first calls pay for ONNX session and cache set-up, which a server pays once)."""
    for q in queries[:20]:  # warm-up
        ann.search(enc.encode_query(q), k)
    runs = []
    for _ in range(n_runs):
        lat = []
        for q in queries:
            t = time.perf_counter()
            ann.search(enc.encode_query(q), k)
            lat.append((time.perf_counter() - t) * 1000)
        lat.sort()
        runs.append({"median": lat[len(lat) // 2], "p95": lat[int(0.95 * (len(lat) - 1))]})
    return runs


def _time_embedding(store: Store, enc: HattenEncoder, sample: int, n_runs: int) -> list[float]:
    """Papers per second of embedding a random sample of the store, per run: a random sample, not
    the first papers, because abstract lengths (and so the speed) differ between venues and years."""
    ids = [r[0] for r in store.conn.execute("SELECT id FROM papers ORDER BY random() LIMIT ?", (sample,))]
    papers = list(store.get_many(ids).values())
    enc.encode_papers(papers[:200])  # warm-up
    rates = []
    for _ in range(n_runs):
        t = time.perf_counter()
        enc.encode_papers(papers)
        rates.append(len(papers) / (time.perf_counter() - t))
    return rates


if __name__ == "__main__":
    sys.exit(main())
