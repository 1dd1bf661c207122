"""Dense vectors at scale (issue 28): quantized ANN indexes against exact search.

Compares, on one vector set, the ANN kinds citewise could serve a big store with:
- ``hnswlib``: the float32 hnswlib cosine index (M 16, ef_construction 200, ef 256), the float32
  kind citewise served until it moved to usearch (hnswlib ships no wheels, so it needs a compiler;
  ``pip install hnswlib`` to measure it);
- ``usearch-f32``: usearch HNSW over float32 vectors, the same graph parameters (the float32 kind
  served now, docs/install.md);
- ``usearch-i8`` / ``usearch-f16``: usearch HNSW over int8 (scalar) / half-precision vectors, same
  graph parameters;
- ``faiss-ivfpq``: faiss IVF + product quantization (48 bytes a vector), its top candidates
  re-scored against the float32 vectors read from the memory-mapped ``emb.f32``;
- ``faiss-hnsw-sq8``: faiss HNSW over 8-bit scalar-quantized vectors (the faiss kinds need
  ``pip install faiss-cpu``, which citewise does not depend on).

For each: build seconds (2 threads, as ``citewise index``; wall and CPU), bytes a vector on disk,
recall@10 and @100 against exact (numpy) search, milliseconds a query (top 100, one thread, median
over the queries of the median of ``--runs`` passes; also in CPU time of the searching thread,
which a shared machine's load inflates less), and the peak RSS of the process that built and
searched it (each kind runs in its own subprocess over a memory-mapped vector file).

Vector sets: the store's own embeddings (``<store>.dense/emb.f32``, e.g. ACM-CR embedded with
``CITEWISE_DENSE_MODEL=static``), or ``--synthetic N`` vectors made from them (each the sum of a
real vector, 0.6 x another and Gaussian noise, normalised: real structure, no duplicates).
Queries: the ACM-CR dev citing sentences encoded by the store's query model (what the server
searches with), else perturbed stored vectors. ``--product`` also opens the store's index through
``AnnIndex`` in a fresh process (both kinds) and reports what the server holds (RSS) and its search
time. Prints JSON.

    python bench/bench_ann_scale.py --store /tmp/acm.sqlite --out runs/ann
    python bench/bench_ann_scale.py --store /tmp/acm.sqlite --synthetic 1000000 --kinds hnswlib,usearch-i8
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED_DATA, machine  # noqa: E402

KINDS = ("hnswlib", "usearch-f32", "usearch-i8", "usearch-f16", "faiss-ivfpq", "faiss-hnsw-sq8")
M, EF_CONSTRUCTION, EF = 16, 200, 256
K = 100


def _rss_mb(field: str = "VmHWM") -> float:
    """Peak (``VmHWM``) or current (``VmRSS``) resident memory of this process, in MB (not
    ``ru_maxrss``: Linux carries it over ``exec``, so a child would report its parent's peak)."""
    with open("/proc/self/status") as fh:
        return round(next(int(line.split()[1]) for line in fh if line.startswith(field)) / 1024, 1)


def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)


def make_vectors(store: Path, n: int, out: Path, seed: int = 28) -> Path:
    """``out``: the store's vectors (n = 0) or n synthetic ones, float32, written block by block."""
    from citewise.indexer.ann import index_folder
    from citewise.indexer.store import Store

    folder = index_folder(Store(store))
    dim = int(json.loads((folder / "meta.json").read_text())["dim"])
    base = np.memmap(folder / "emb.f32", dtype=np.float32, mode="r").reshape(-1, dim)
    if n <= 0:
        return folder / "emb.f32"
    rng = np.random.default_rng(seed)
    with open(out, "wb") as fh:
        for s in range(0, n, 100_000):
            m = min(100_000, n - s)
            a = base[rng.integers(0, len(base), m)]
            b = base[rng.integers(0, len(base), m)]
            noise = rng.normal(0, 0.015, (m, dim)).astype(np.float32)
            fh.write(_normalise(a + 0.6 * b + noise).astype(np.float32).tobytes())
    return out


def make_queries(store: Path, vecs: np.ndarray, n: int = 300, seed: int = 5) -> np.ndarray:
    """The ACM-CR dev queries through the store's query model, else perturbed stored vectors."""
    dev = SHARED_DATA / "acm-cr" / "dev"
    if dev.exists():
        from citewise.evaluation import protocol as ev
        from citewise.indexer.store import Store
        from citewise.models import dense_index

        index = dense_index.open_index(Store(store))
        if index is not None:
            queries = [q.query for q in ev.load_dev_queries(dev, None)][:n]
            return np.stack([index.encoder.encode_query(q) for q in queries]).astype(np.float32)
    rng = np.random.default_rng(seed)
    picked = vecs[rng.integers(0, len(vecs), n)]
    return _normalise(picked + rng.normal(0, 0.03, picked.shape).astype(np.float32)).astype(np.float32)


def exact_top(vecs: np.ndarray, queries: np.ndarray, k: int = K, block: int = 200_000) -> np.ndarray:
    """Exact top-``k`` row numbers by cosine, block by block over a memory-mapped matrix."""
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    for s in range(0, len(vecs), block):
        sims = queries @ np.asarray(vecs[s : s + block]).T
        idx = np.argpartition(-sims, min(k, sims.shape[1] - 1), axis=1)[:, :k]
        best_s = np.concatenate([best_s, np.take_along_axis(sims, idx, 1)], 1)
        best_i = np.concatenate([best_i, idx + s], 1)
        keep = np.argsort(-best_s, axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(best_s, keep, 1), np.take_along_axis(best_i, keep, 1)
    return best_i


# -- one kind per process --------------------------------------------------------------------------


def _build(kind: str, vecs: np.ndarray, path: Path, threads: int):
    """Build ``kind`` over ``vecs`` and save it to ``path``; returns a search function."""
    n, dim = vecs.shape
    if kind == "hnswlib":
        import hnswlib

        index = hnswlib.Index(space="cosine", dim=dim)
        index.init_index(max_elements=n, M=M, ef_construction=EF_CONSTRUCTION)
        index.set_num_threads(threads)
        for s in range(0, n, 200_000):
            index.add_items(np.asarray(vecs[s : s + 200_000]), np.arange(s, min(n, s + 200_000)))
        index.set_ef(EF)
        index.set_num_threads(1)
        index.save_index(str(path))
        return {kind: lambda q, k: index.knn_query(q[None], k=k)[0][0]}
    if kind.startswith("usearch"):
        from usearch.index import Index

        index = Index(
            ndim=dim,
            metric="cos",
            dtype=kind.split("-")[1],  # f32, f16 or i8
            connectivity=M,
            expansion_add=EF_CONSTRUCTION,
            expansion_search=EF,
        )
        for s in range(0, n, 200_000):
            block = np.asarray(vecs[s : s + 200_000])
            index.add(np.arange(s, s + len(block)), block, threads=threads)
        index.save(str(path))

        def rescored(q, k):  # what AnnIndex.search does: 2k candidates re-scored in float32
            index.expansion_search = max(EF, 2 * k)
            cand = np.sort(index.search(q, 2 * k, threads=1).keys)
            return cand[np.argsort(-(np.asarray(vecs[cand]) @ q))[:k]]

        def plain(q, k):
            index.expansion_search = EF
            return index.search(q, k, threads=1).keys

        if kind == "usearch-f32":  # float32 distances are already exact: nothing to re-score
            return {kind: plain}
        return {kind: plain, f"{kind}+rescore": rescored}
    return _build_faiss(kind, vecs, path, threads)


def _build_faiss(kind: str, vecs: np.ndarray, path: Path, threads: int):
    import faiss

    faiss.omp_set_num_threads(threads)
    n, dim = vecs.shape
    rng = np.random.default_rng(1)
    train = np.asarray(vecs[np.sort(rng.choice(n, min(n, 100_000), replace=False))])
    if kind == "faiss-ivfpq":
        nlist = int(4 * np.sqrt(n))
        index = faiss.IndexIVFPQ(faiss.IndexFlatIP(dim), dim, nlist, 48, 8, faiss.METRIC_INNER_PRODUCT)
        index.train(train)
        index.nprobe = 32
    else:
        index = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_8bit, M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = EF_CONSTRUCTION
        index.train(train)
        index.hnsw.efSearch = EF
    for s in range(0, n, 200_000):
        index.add(np.asarray(vecs[s : s + 200_000]))
    faiss.write_index(index, str(path))
    faiss.omp_set_num_threads(1)

    def search(q, k):
        if kind != "faiss-ivfpq":
            return index.search(q[None], k)[1][0]
        cand = index.search(q[None], 4 * k)[1][0]  # re-scored against the float32 rows (memory-mapped)
        cand = np.sort(cand[cand >= 0])
        sims = np.asarray(vecs[cand]) @ q
        return cand[np.argsort(-sims)[:k]]

    return {kind: search}


def run_one(kind: str, vec_path: Path, dim: int, work: Path, runs: int, threads: int) -> dict:
    vecs = np.memmap(vec_path, dtype=np.float32, mode="r").reshape(-1, dim)
    queries = np.load(work / "queries.npy")
    truth = np.load(work / "truth.npy")
    path = work / f"index.{kind}"
    t0, cpu0 = time.perf_counter(), time.process_time()
    searches = _build(kind, vecs, path, threads)
    build_s, build_cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    rss_built = _rss_mb()
    out = {
        "kind": kind,
        "n": len(vecs),
        "build_s": round(build_s, 1),
        # CPU seconds of all threads: on a shared machine the wall time follows the load, this less
        "build_cpu_s": round(build_cpu_s, 1),
        "bytes_per_vector": round(path.stat().st_size / len(vecs), 1),
        "index_mb": round(path.stat().st_size / 2**20, 1),
        "rss_peak_mb_after_build": rss_built,
    }
    for name, search in searches.items():
        out[name] = _measure(search, queries, truth, runs)
    return {**out, "rss_peak_mb": _rss_mb(), "machine": machine()}


def _recall(got: list[list[int]], truth: list[list[int]]) -> dict:
    """Recall@10 and @100: the share of exact search's top k found in the top k."""
    return {
        f"recall@{k}": round(
            float(np.mean([len(set(g[:k]) & set(t[:k])) / k for g, t in zip(got, truth, strict=True)])), 4
        )
        for k in (10, K)
    }


def _measure(search, queries: np.ndarray, truth: np.ndarray, runs: int) -> dict:
    """Recall@10/@100 against exact, and ms a query (median over queries of the per-query median)."""
    recall = _recall([np.asarray(search(q, K)).tolist() for q in queries], truth.tolist())
    per_query = np.zeros((runs, len(queries)))
    cpu = np.zeros((runs, len(queries)))  # this thread's CPU time: what the load does not inflate
    for r in range(runs):
        for i, q in enumerate(queries):
            t, c = time.perf_counter(), time.thread_time()
            search(q, K)
            per_query[r, i], cpu[r, i] = time.perf_counter() - t, time.thread_time() - c
    ms = 1000 * np.median(per_query, axis=0)
    return {
        **recall,
        "query_ms_median": round(float(np.median(ms)), 3),
        "query_ms_p95": round(float(np.percentile(ms, 95)), 3),
        "query_cpu_ms_median": round(float(1000 * np.median(np.median(cpu, axis=0))), 3),
    }


# -- through the product -------------------------------------------------------------------------


def product_build(store: Path, quantize_above: int) -> dict:
    """``citewise index``'s index build with a given threshold (the kind it picks), timed."""
    from citewise.indexer.store import Store
    from citewise.models import dense_index

    index = dense_index.open_index(Store(store))
    meta = json.loads(index.meta_path.read_text()) if index is not None and index.meta_path.exists() else {}
    if index is None or meta.get("model_hash") != index.encoder.model_hash:
        raise SystemExit("the store is not embedded with this model: set CITEWISE_DENSE_MODEL (e.g. static)")
    t0 = time.perf_counter()
    summary = dense_index.build_index(Store(store), quantize_above=quantize_above)
    return {"summary": summary, "build_s": round(time.perf_counter() - t0, 1), "rss_peak_mb": _rss_mb()}


def product_open(store: Path, work: Path, runs: int) -> dict:
    """What a server holds: ``AnnIndex.load`` in this (fresh) process, then timed searches, and
    recall@10/@100 of ``AnnIndex.search`` (paper ids) against exact search."""
    from citewise.indexer.store import Store
    from citewise.models import dense_index

    base = _rss_mb("VmRSS")
    index = dense_index.open_index(Store(store))  # the encoder (ONNX query model) loaded
    with_encoder = _rss_mb("VmRSS")
    t0 = time.perf_counter()
    assert index is not None and index.load()
    open_s = time.perf_counter() - t0
    opened = _rss_mb("VmRSS")
    meta = json.loads(index.meta_path.read_text())
    queries, truth = np.load(work / "queries.npy"), np.load(work / "truth.npy")
    row_ids = np.fromfile(index.folder / "rows.i64", dtype=np.int64).reshape(-1, 2)[:, 0]
    got = [[pid for pid, _ in index.search(q, K)] for q in queries]
    recall = _recall(got, [row_ids[t].tolist() for t in truth])
    times = np.zeros((runs, len(queries)))
    for r in range(runs):
        for i, q in enumerate(queries):
            t = time.perf_counter()
            index.search(q, K)
            times[r, i] = time.perf_counter() - t
    deep = []
    for q in queries[:100]:  # the prefetch's depth: 1,000
        t = time.perf_counter()
        index.search(q, 1000)
        deep.append(time.perf_counter() - t)
    return {
        "index_kind": meta.get("kind"),
        **recall,
        "search_ms_median": round(float(1000 * np.median(np.median(times, axis=0))), 3),
        "search_1000_ms_median": round(float(1000 * np.median(deep)), 3),
        "open_s": round(open_s, 2),
        "rss_start_mb": base,
        "rss_with_encoder_mb": with_encoder,
        "rss_opened_mb": opened,
        "rss_after_searches_mb": _rss_mb("VmRSS"),
        "rss_anon_mb": _rss_mb("RssAnon"),  # the heap: arrays, the hnswlib index
        "rss_file_mb": _rss_mb("RssFile"),  # mapped files' resident pages (shared with the page cache)
        "rss_peak_mb": _rss_mb(),
        "machine": machine(),
    }


def kill_check(store: Path, seed: int = 28, max_runs: int = 40) -> dict:
    """Embedding + int8 index build killed (SIGKILL) after random delays, rerun until one run
    completes: every run must resume (rows never lost or duplicated) and the end state must equal
    the store (one valid row a paper, the index covering every row, no temporary file left)."""
    import random
    import signal

    from citewise.indexer.ann import index_folder
    from citewise.indexer.store import Store

    rng = random.Random(seed)
    code = (
        "import sys; from citewise.indexer.store import Store; from citewise.models import dense_index; "
        "print(dense_index.build_index(Store(sys.argv[1]), quantize_above=0, checkpoint_rows=20000))"
    )
    runs, t0 = [], time.perf_counter()
    folder = index_folder(Store(store))
    for _ in range(max_runs):
        rows_before = (folder / "rows.i64").stat().st_size // 16 if (folder / "rows.i64").exists() else 0
        meta = json.loads((folder / "meta.json").read_text()) if (folder / "meta.json").exists() else {}
        rows_before = {"rows": rows_before, "index_rows": meta.get("index_rows", 0)}
        proc = subprocess.Popen([sys.executable, "-c", code, str(store)], stdout=subprocess.PIPE, text=True)
        delay = rng.uniform(2, 25)
        try:
            out, _ = proc.communicate(timeout=delay)
            runs.append(
                {"delay_s": round(delay, 1), "rows_before": rows_before, "completed": out.strip()[-300:]}
            )
            break
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            runs.append({"delay_s": round(delay, 1), "rows_before": rows_before, "killed": True})
    meta = json.loads((folder / "meta.json").read_text())
    rows = np.fromfile(folder / "rows.i64", dtype=np.int64).reshape(-1, 2)
    return {
        "runs": runs,
        "killed": sum(1 for r in runs if r.get("killed")),
        "seconds": round(time.perf_counter() - t0, 1),
        "papers": Store(store).count(),
        "rows": len(rows),
        "distinct_papers_in_rows": len(np.unique(rows[:, 0])),
        "meta": {k: meta.get(k) for k in ("kind", "rows", "valid", "index_rows", "index_bytes")},
        "tmp_files_left": [p.name for p in folder.glob("*.tmp*")],
        "machine": machine(),
    }


def _child(args: list[str], env: dict | None = None) -> dict:
    import os

    out = subprocess.run(
        [sys.executable, __file__, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if out.returncode != 0:
        return {"error": out.stderr[-2000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", required=True, help="an embedded store (citewise index --embed)")
    ap.add_argument("--synthetic", type=int, default=0, help="N synthetic vectors instead of the store's")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--out", default="runs/ann", help="work folder (vectors, indexes)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--product", action="store_true", help="also open the store's index as a server does")
    ap.add_argument("--kill-check", action="store_true", help="kill -9 embedding + build until it completes")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--product-build", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--product-open", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dim", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    work = Path(args.out)
    if args.one:
        print(json.dumps(run_one(args.one, work / "vectors", args.dim, work, args.runs, args.threads)))
        return 0
    if args.kill_check:
        print(json.dumps(kill_check(Path(args.store)), indent=2))
        return 0
    if args.product_build is not None:
        print(json.dumps(product_build(Path(args.store), args.product_build)))
        return 0
    if args.product_open:
        print(json.dumps(product_open(Path(args.store), work, args.runs)))
        return 0
    return _run_all(args, work)


def _run_all(args, work: Path) -> int:
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    src = make_vectors(Path(args.store), args.synthetic, work / "vectors.synthetic")
    vectors = work / "vectors"
    vectors.unlink(missing_ok=True)
    vectors.symlink_to(src.resolve())
    from citewise.indexer.ann import index_folder
    from citewise.indexer.store import Store

    dim = int(json.loads((index_folder(Store(args.store)) / "meta.json").read_text())["dim"])
    vecs = np.memmap(vectors, dtype=np.float32, mode="r").reshape(-1, dim)
    queries = make_queries(Path(args.store), vecs)
    np.save(work / "queries.npy", queries)
    t1 = time.perf_counter()
    np.save(work / "truth.npy", exact_top(vecs, queries))
    report: dict = {
        "n": len(vecs),
        "dim": dim,
        "queries": len(queries),
        "vectors_s": round(t1 - t0, 1),
        "exact_all_queries_s": round(time.perf_counter() - t1, 2),
        "kinds": {},
    }
    for kind in filter(None, args.kinds.split(",")):
        one = ["--store", args.store, "--out", str(work), "--one", kind, "--dim", str(dim)]
        report["kinds"][kind] = _child([*one, "--runs", str(args.runs), "--threads", str(args.threads)])
        (work / f"index.{kind}").unlink(missing_ok=True)
        print(json.dumps({kind: report["kinds"][kind]}), file=sys.stderr)
    if args.product:  # the store's own index, built by AnnIndex as each kind, then opened
        for name, above in (("hnsw", 1 << 62), ("usearch-i8", 0)):
            store = ["--store", args.store, "--out", str(work)]
            built = _child([*store, "--product-build", str(above)])
            report[f"product_{name}"] = {"build": built, "open": _child([*store, "--product-open"])}
    report["machine"] = machine()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
