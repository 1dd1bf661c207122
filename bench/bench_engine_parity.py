"""Local engine vs Milvus on ACM-CR dev: R@K/MRR of the same BM25 prefetch, latency side by side,
import throughput, collection size and the Milvus process's memory. Prints JSON.

Usage (the store must hold the ACM-CR collection; Milvus Lite unless --engine names a server):
    python bench/bench_engine_parity.py --store data/acm-cr.sqlite [--engine SPEC] [--fresh]
        [--limit N] [--dense-random DIM] [--out FILE]

``--fresh`` drops the collection first (import throughput is measured then); ``--dense-random``
adds a second collection with random unit vectors of that size, for dense and hybrid latency
(random vectors: latency only, no quality). ``milvus_sequential`` is the Milvus run again with the
BM25 views sent one after another (as before issue 28) instead of in parallel.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from _common import SHARED_DATA, machine

from citewise.evaluation import engines as engine_eval
from citewise.evaluation import protocol as ev
from citewise.indexer.engine import parse_engine
from citewise.indexer.engine_milvus import open_engine
from citewise.indexer.store import Store
from citewise.models.engines import store_vectors
from citewise.models.prefetch import view_text
from citewise.models.recommender import Recommender


def milvus_rss_mb(path: str) -> float:
    """Resident memory of the Milvus Lite process serving ``path`` (0 for a remote server)."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if "milvus" in cmd and path in cmd:
                status = Path(f"/proc/{pid}/status").read_text()
                total += int(next(x for x in status.splitlines() if x.startswith("VmRSS")).split()[1])
        except (OSError, StopIteration):
            continue
    return round(total / 1024, 1)


def median_ms(fn, items) -> float:
    times = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        times.append(1000 * (time.perf_counter() - t))
    return round(statistics.median(times), 2)


def sync(engine, store: Store, fresh: bool, vectors=None) -> dict:
    if fresh:
        engine.drop()
    stats = engine.sync(store, vectors, batch=2000)
    return stats.as_dict()


def raw_latency(store: Store, local: Recommender, engine, queries: list[ev.EvalQuery]) -> dict:
    """One BM25 query (local+title view, top 100) and one metadata fetch of 200 papers."""
    texts = [view_text(q.query, "local+title") for q in queries]
    ids = [pid for pid, _ in local.bm25.search(texts[0], 200)]
    return {
        "bm25_top100_local_ms": median_ms(lambda t: local.bm25.search(t, 100), texts),
        "bm25_top100_milvus_ms": median_ms(lambda t: engine.search(t, 100), texts),
        "metadata_200_sqlite_ms": median_ms(lambda _: store.get_many(ids), range(50)),
    }


def dense_figures(store: Store, spec, dim: int, fresh: bool, queries: list[ev.EvalQuery]) -> dict:
    import numpy as np

    from citewise.indexer.engine_milvus import DenseVectors

    ids = [pid for (pid,) in store.conn.execute("SELECT id FROM papers ORDER BY id")]
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((len(ids), dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    engine = open_engine(f"{spec}_dense{dim}")
    vectors = DenseVectors(f"random{dim}", dim, dict(zip(ids, vecs, strict=True)))
    out = {"dim": dim, "sync": sync(engine, store, fresh, vectors)}
    texts = [view_text(q.query, "local+title") for q in queries]
    qv = rng.standard_normal((len(texts), dim)).astype(np.float32)
    out["dense_top100_ms"] = median_ms(lambda i: engine.dense(qv[i], 100), range(len(texts)))
    out["hybrid_top100_ms"] = median_ms(lambda i: engine.hybrid(texts[i], qv[i], 100), range(len(texts)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--engine", help="default: milvus-lite:<tmp>/acm-cr-parity.db#acmcr")
    ap.add_argument("--fresh", action="store_true", help="drop the collection first (measures the import)")
    ap.add_argument("--limit", type=int, help="only the first N dev queries")
    ap.add_argument("--dense-random", type=int, metavar="DIM")
    ap.add_argument(
        "--prefetch",
        choices=("bm25", "hybrid"),
        default="bm25",
        help="hybrid: BM25 + the dense model (embedded store)",
    )
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()
    spec = parse_engine(args.engine or f"milvus-lite:{tempfile.gettempdir()}/acm-cr-parity.db#acmcr")
    before = machine()
    store = Store(args.store, create=False)
    coll = ev.acmcr_collection(store, ev.load_blacklist(SHARED_DATA / "acm-cr" / "blacklist.txt"))
    queries = ev.load_dev_queries(SHARED_DATA / "acm-cr" / "dev", coll.dois)[: args.limit]
    engine = open_engine(spec)
    out: dict = {"store": str(store.path), "papers": store.count(), "engine": str(spec), "machine": before}
    out["prefetch"] = args.prefetch
    # The store's dense vectors for hybrid (a sync without them would rebuild the collection BM25-only).
    vectors = store_vectors(store) if args.prefetch == "hybrid" else None
    out["sync"] = sync(engine, store, args.fresh, vectors)
    t = time.perf_counter()
    dense = args.prefetch != "bm25"
    local = Recommender(store, prefetch_mode=args.prefetch, use_dense=dense, use_reranker=False)
    out["local_open_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    milvus = Recommender(
        store, prefetch_mode=args.prefetch, use_dense=dense, use_reranker=False, engine=str(spec)
    )
    if dense and (local.dense is None or milvus.dense is None):
        raise SystemExit("--prefetch hybrid needs an embedding index and a collection with its vectors")
    out["milvus_open_s"] = round(time.perf_counter() - t, 2)
    for rec in (local, milvus):  # warm both (caches, Milvus segment loading)
        engine_eval.run_engine(rec, queries[:5], coll, mode=args.prefetch)
    runs = {"local": engine_eval.run_engine(local, queries, coll, mode=args.prefetch)}
    runs["milvus"] = engine_eval.run_engine(milvus, queries, coll, mode=args.prefetch)
    milvus.bm25.parallel_queries = False  # the views one after another: the latency before
    runs["milvus_sequential"] = engine_eval.run_engine(milvus, queries, coll, mode=args.prefetch)
    milvus.bm25.parallel_queries = True
    out["runs"] = {name: run.as_dict() for name, run in runs.items()}
    out["delta"] = {
        k: round(runs["milvus"].metrics[k] - runs["local"].metrics[k], 4) for k in ("R@10", "MRR")
    }
    out["top10_overlap"] = engine_eval.top10_overlap(runs["local"], runs["milvus"])
    out["raw"] = raw_latency(store, local, engine, queries)
    if spec.kind == "milvus-lite":
        out["lite_file_mb"] = round(os.path.getsize(spec.uri) / 1e6, 1)
        out["milvus_rss_mb"] = milvus_rss_mb(spec.uri)
    if args.dense_random:
        out["dense_random"] = dense_figures(store, spec, args.dense_random, args.fresh, queries)
    out["machine_after"] = machine()
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
