"""What the nearest-neighbour graph's build costs, and what it keeps, per graph setting.

``citewise index`` spends most of its post-import CPU on the usearch HNSW graph over the papers'
vectors. This sweeps the settings that set that cost — the vectors' type in the graph (``f32``,
``f16``, ``i8``), ``connectivity`` (M) and ``expansion_add`` (ef_construction) — over one store's
real vectors (``<store>.dense/emb.f32``), each build in its own process (2 threads, as ``citewise
index``), and reports for each: build wall and CPU seconds (user + sys of all threads: what a
shared machine's load moves least), peak RSS, index bytes, and the recall against exact float32
search of real ACM-CR dev queries (the citing sentences through the store's query model) at the
depths the product searches: 10 (ef 256) and 1,000 (ef 1,000, the prefetch's depth). Kinds other
than ``f32`` are also measured with their candidates re-scored in float32 (``+rescore``: what
``AnnIndex.search`` does for a quantized graph). Prints JSON; the machine's load with each build.

    python bench/bench_ann_build.py --store /work/stores/acmcr.sqlite \\
        --configs f32:16:200,f32:16:64,i8:16:64 --out /tmp/annb
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED_DATA, machine  # noqa: E402
from bench_ann_scale import _rss_mb, exact_top  # noqa: E402

DEPTHS = {10: 256, 1000: 1000}  # search depth -> ef, as AnnIndex.search asks (max(ef 256, k))
DEEP_EFS = (1500, 2000)  # the deep search again with a wider beam: what a cheaper graph needs


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _recall(got: list[np.ndarray], truth: np.ndarray, k: int) -> float:
    return round(
        float(
            np.mean(
                [len(set(g[:k].tolist()) & set(t[:k].tolist())) / k for g, t in zip(got, truth, strict=True)]
            )
        ),
        4,
    )


def _rescore(vecs: np.ndarray, found: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The graph's candidates in the order of their float32 cosines (rows read in file order)."""
    rows = np.sort(found)
    return rows[np.argsort(-(np.asarray(vecs[rows]) @ q), kind="stable")]


def _queries(store: Path, n: int) -> np.ndarray:
    """``n`` ACM-CR dev queries spread evenly over all of them (both venues), through the store's
    query model: what the server searches with."""
    from citewise.evaluation import protocol as ev
    from citewise.indexer.store import Store
    from citewise.models import dense_index

    dev = SHARED_DATA / "acm-cr" / "dev"
    index = dense_index.open_index(Store(store))
    if index is None or not dev.exists():
        raise SystemExit(f"needs the ACM-CR dev set ({dev}) and the installed dense model")
    queries = [q.query for q in ev.load_dev_queries(dev, None)]
    picked = np.linspace(0, len(queries) - 1, min(n, len(queries))).astype(int)
    return np.stack([index.encoder.encode_query(queries[i]) for i in picked]).astype(np.float32)


def run_one(config: str, work: Path, dim: int, threads: int) -> dict:
    """Build one graph (``dtype:connectivity:expansion_add``) over the vectors, search the queries."""
    from usearch.index import Index

    dtype, conn, exp = config.split(":")
    vecs = np.memmap(work / "vectors", dtype=np.float32, mode="r").reshape(-1, dim)
    queries, truth = np.load(work / "queries.npy"), np.load(work / "truth.npy")
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), _cpu_s()
    index = Index(ndim=dim, metric="cos", dtype=dtype, connectivity=int(conn), expansion_add=int(exp))
    for s in range(0, len(vecs), 100_000):
        block = np.ascontiguousarray(vecs[s : s + 100_000])
        index.add(np.arange(s, s + len(block)), block, threads=threads)
    build_s, build_cpu = time.perf_counter() - t0, _cpu_s() - c0
    path = work / f"index.{config.replace(':', '-')}"
    index.save(str(path))
    out = {
        "config": config,
        "n": len(vecs),
        "build_s": round(build_s, 1),
        "build_cpu_s": round(build_cpu, 1),
        "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "index_mb": round(path.stat().st_size / 2**20, 1),
        "rss_peak_mb": _rss_mb(),
    }
    path.unlink()
    for k, ef in DEPTHS.items():
        index.expansion_search = ef
        c1 = _cpu_s()
        got = [np.asarray(index.search(q, k, threads=1).keys) for q in queries]
        out[f"search_cpu_ms@{k}"] = round(1000 * (_cpu_s() - c1) / len(queries), 3)
        out[f"recall@{k}"] = _recall(got, truth, k)
        if dtype != "f32":  # every candidate re-scored with its float32 row
            rescored = [_rescore(vecs, g, q) for g, q in zip(got, queries, strict=True)]
            out[f"recall@{k}+rescore"] = _recall(rescored, truth, k)
            out[f"top10_order@{k}+rescore"] = round(
                float(
                    np.mean([np.array_equal(r[:10], t[:10]) for r, t in zip(rescored, truth, strict=True)])
                ),
                4,
            )
        if k == max(DEPTHS) and dtype == "f32":
            for ef_deep in DEEP_EFS:
                index.expansion_search = ef_deep
                c2 = _cpu_s()
                wide = [np.asarray(index.search(q, k, threads=1).keys) for q in queries]
                out[f"search_cpu_ms@{k}/ef{ef_deep}"] = round(1000 * (_cpu_s() - c2) / len(queries), 3)
                out[f"recall@{k}/ef{ef_deep}"] = _recall(wide, truth, k)
        out[f"top10_order@{k}"] = round(
            float(np.mean([np.array_equal(g[:10], t[:10]) for g, t in zip(got, truth, strict=True)])), 4
        )
    return out


def prepare(store: Path, work: Path, n_queries: int) -> int:
    """The vectors (a link to the store's ``emb.f32``), the dev queries and their exact top 1,000."""
    from citewise.indexer.ann import index_folder
    from citewise.indexer.store import Store

    work.mkdir(parents=True, exist_ok=True)
    folder = index_folder(Store(store))
    dim = int(json.loads((folder / "meta.json").read_text())["dim"])
    link = work / "vectors"
    link.unlink(missing_ok=True)
    link.symlink_to((folder / "emb.f32").resolve())
    if not (work / "truth.npy").exists():
        vecs = np.memmap(link, dtype=np.float32, mode="r").reshape(-1, dim)
        queries = _queries(store, n_queries)
        np.save(work / "queries.npy", queries)
        np.save(work / "truth.npy", exact_top(vecs, queries, max(DEPTHS)))
    return dim


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", required=True, help="an embedded store")
    ap.add_argument("--configs", default="f32:16:200,f32:16:64,i8:16:64", help="dtype:M:ef_construction,...")
    ap.add_argument("--out", default="runs/ann-build", help="work folder (queries, exact results)")
    ap.add_argument("--queries", type=int, default=1000, help="ACM-CR dev queries (default 1,000)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--dim", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    work = Path(args.out)
    if args.one:
        print(json.dumps(run_one(args.one, work, args.dim, args.threads)))
        return 0
    dim = prepare(Path(args.store), work, args.queries)
    report = {"queries": int(np.load(work / "queries.npy").shape[0]), "builds": []}
    for config in filter(None, args.configs.split(",")):
        cmd = [sys.executable, __file__, "--store", args.store, "--out", str(work), "--one", config]
        done = subprocess.run(
            [*cmd, "--dim", str(dim), "--threads", str(args.threads)],
            capture_output=True,
            text=True,
            check=False,
        )
        row = (
            json.loads(done.stdout.strip().splitlines()[-1])
            if done.returncode == 0
            else {"config": config, "error": done.stderr[-1500:]}
        )
        report["builds"].append(row)
        print(json.dumps(row), file=sys.stderr)
    report["machine"] = machine()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
