"""How citewise grows with the store: 110k papers to 10M on this machine.

The stores are built in stages, each from the one before, the way a user's store grows:
110k is the real ACM-CR collection; the next size adds the real ACL Anthology and the first
generated papers; each later size adds generated papers (``bench/make_scale_corpus.py``:
recombined real text, citation edges and citing sentences in the ACL store's proportions, fixed
seed). Each stage's papers are generated as a part of their own (``--first``), imported, and the
part deleted (``--keep-parts`` keeps them): ten million papers never sit on disk twice.
At each size it measures, and writes to ``WORK/scale.json`` (stages already built are reused,
so an interrupted run resumes where it stopped, stage by stage; each row says when it was
measured):

- import: seconds and papers/s of ``citewise index`` for the stage's sources (JSON Lines for
  the generated papers), without the search index;
- BM25 build: seconds and peak memory of a from-scratch build, in a process of its own;
- on-disk size of the store and its index, bytes a paper;
- through the language server (``bench/bench_lsp.py`` on ACM-CR dev drafts): time to ready,
  first completion answer (median, p95), the reranked list (median), and the server's peak
  RSS while it served them.

    python bench/bench_scale.py --work runs/scale --pool ACM.sqlite --pool ACL.sqlite \
        [--sizes 110000 500000 1000000 2000000 5000000 10000000]

``--pool``: stores of the real ACM-CR and ACL papers the generated text is drawn from (default
``data/acm-cr.sqlite`` and ``data/acl.sqlite``).

``--serve-again N``: after the stages, serve the store as it stands (the largest size) N more
times with the code checked out now, without rebuilding it: each run and their medians go to
that size's ``serve_again`` list in ``WORK/scale.json``, dated, with the load before and after
(the row's own ``serve`` stays the figure of the build it was measured with).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from _common import REPO, SHARED_DATA, machine

PY = sys.executable
ACM = SHARED_DATA / "acm-cr" / "acm-dl"
ACL = SHARED_DATA / "acl-anthology" / "xml"


def run_json(cmd: list[str], **kw) -> dict:
    """Run a command that prints one JSON object last; return it (stderr passes through)."""
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, cwd=REPO, **kw).stdout
    return json.loads(out[out.index("{") :])


def papers_in(store: Path) -> int:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM papers").fetchone()[0]
    finally:
        conn.close()


def import_stage(store: Path, sources: list[Path]) -> dict:
    """``citewise index`` of ``sources`` into ``store`` (no search index, no embedding: the scale
    targets are for a store without dense vectors, and the dense index is measured on its own):
    seconds and papers/s."""
    before = papers_in(store) if store.exists() else 0
    t0 = time.perf_counter()
    cmd = [PY, "-m", "citewise.cli", "index", *map(str, sources), "--store", str(store)]
    subprocess.run(
        [*cmd, "--no-search-index", "--no-embed", "--json", "-q"],
        check=True,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
    )
    seconds = time.perf_counter() - t0
    added = papers_in(store) - before
    return {"added": added, "import_s": round(seconds, 1), "papers_per_s": round(added / seconds, 1)}


_BM25_BUILD = """
import json, resource, shutil, sys, time
from citewise.indexer import bm25, bm25_files
from citewise.indexer.store import Store
store = Store(sys.argv[1], create=False)
shutil.rmtree(bm25_files.index_folder(store), ignore_errors=True)
t0 = time.perf_counter()
index = bm25_files.load_or_build(store)
stats = getattr(index, "build_stats", None)
print(json.dumps({"bm25_build_s": round(time.perf_counter() - t0, 1),
                  "bm25_build_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                  "bm25_budget_mb": bm25_files.budget_mb(),
                  "bm25_build": stats.__dict__ if stats is not None else "in memory"}))
"""


def bm25_build(store: Path) -> dict:
    return run_json([PY, "-c", _BM25_BUILD, str(store)])


def disk(store: Path, papers: int) -> dict:
    """Bytes on disk: the store file (WAL folded in first) and the BM25 index beside it."""
    conn = sqlite3.connect(store)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    index = sum(f.stat().st_size for f in store.parent.glob(store.name + ".bm25/*") if f.is_file())
    size = store.stat().st_size
    return {
        "store_mb": round(size / 1e6, 1),
        "store_bytes_per_paper": round(size / papers),
        "bm25_index_mb": round(index / 1e6, 1),
    }


class RssWatch(threading.Thread):
    """Peak RSS of the ``citewise serve`` process(es) serving ``store``, sampled every 0.2 s, and
    its peak anonymous part (the heap: what the process itself holds). The rest is pages of
    memory-mapped files (the BM25 postings of big stores) that the kernel may drop at will."""

    def __init__(self, store: Path) -> None:
        super().__init__(daemon=True)
        self.store, self.peak_kb, self.anon_kb, self.done = str(store), 0, 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    if b"serve" in cmd and self.store.encode() in cmd:
                        status = Path(f"/proc/{pid}/status").read_text()
                        rss = int(status.split("VmRSS:")[1].split()[0])
                        self.peak_kb = max(self.peak_kb, rss)
                        if "RssAnon:" in status:
                            anon = int(status.split("RssAnon:")[1].split()[0])
                            self.anon_kb = max(self.anon_kb, anon)
                except (OSError, IndexError, ValueError):
                    continue


def serve(store: Path, papers: int, queries: int) -> dict:
    watch = RssWatch(store)
    watch.start()
    try:
        bench = [
            PY,
            "bench/bench_lsp.py",
            "--store",
            str(store),
            "--papers",
            str(papers),
            "--queries",
            str(queries),
        ]
        out = run_json(bench)
    finally:
        watch.done.set()
        watch.join()
    keep = ("server_ready_s", "first_answer_ms", "reranked_served_ms", "queries", "R@10")
    return {
        **{k: out[k] for k in keep},
        "server_peak_rss_mb": round(watch.peak_kb / 1024),
        "server_peak_anon_mb": round(watch.anon_kb / 1024),
    }


def stages(work: Path, sizes: list[int]) -> list[tuple[int, list[Path]]]:
    """Each size with the sources that take the store from the previous size to it: ACM-CR first,
    then the ACL Anthology, and generated papers for the rest of each size."""
    plan: list[tuple[int, list[Path]]] = []
    real = generated = 0
    for i, size in enumerate(sizes):
        sources: list[Path] = []
        if i == 0:
            sources, real = [ACM], 109_569
        elif i == 1:
            sources, real = [ACL], real + 61_686
        want = size - real - generated
        if want > 0:
            sources.append(work / f"generated-{generated}-{generated + want}.jsonl")
            generated += want
        plan.append((size, sources))
    return plan


def make_part(part: Path, seed: int, pool: list[str]) -> None:
    """Generate one stage's papers (``generated-LO-HI.jsonl``: papers LO..HI-1) unless present."""
    if part.exists():
        return
    lo, hi = (int(x) for x in part.stem.split("-")[1:3])
    cmd = [PY, "bench/make_scale_corpus.py", "--papers", str(hi - lo), "--first", str(lo)]
    cmd += ["--seed", str(seed), "--out", str(part)]
    run_json(cmd + [x for s in pool for x in ("--store", s)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="runs/scale", help="folder for the stores and results (kept)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[110_000, 500_000, 1_000_000])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--papers", type=int, default=5, help="ACM-CR dev drafts typed into the server")
    ap.add_argument("--queries", type=int, default=10, help="placeholders per draft")
    ap.add_argument("--pool", action="append", help="a store of real papers to draw text from (repeat)")
    ap.add_argument("--keep-parts", action="store_true", help="keep the generated JSON Lines parts")
    ap.add_argument("--serve-again", type=int, default=0, help="serve the finished store N more times")
    args = ap.parse_args()
    pool = args.pool or [str(REPO / "data" / "acm-cr.sqlite"), str(REPO / "data" / "acl.sqlite")]
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    results_path = work / "scale.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    plan = stages(work, args.sizes)
    store = work / "store.sqlite"
    for size, sources in plan:
        row = results.get(str(size), {})
        if "import" not in row:
            parts = [p for p in sources if p.name.startswith("generated-")]
            for part in parts:
                make_part(part, args.seed, pool)
            # An interrupted import rolls its file back; re-running finds the earlier files unchanged.
            row = {"import": import_stage(store, sources), "machine": machine(), "imported_at": time.ctime()}
            results[str(size)] = row
            results_path.write_text(json.dumps(results, indent=2))
            for part in parts if not args.keep_parts else []:
                part.unlink()
        if "serve" not in row:
            n = papers_in(store)
            row.update({"papers": n, **bm25_build(store), **disk(store, n)})
            row["serve"] = serve(store, args.papers, args.queries)
            row["machine_after"] = machine()
            row["measured_at"] = time.ctime()
            results_path.write_text(json.dumps(results, indent=2))
    if args.serve_again and plan:
        row = results[str(plan[-1][0])]
        row.setdefault("serve_again", []).append(
            serve_again(store, args.papers, args.queries, args.serve_again)
        )
        results_path.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


def serve_again(store: Path, papers: int, queries: int, times: int) -> dict:
    """``times`` runs of :func:`serve` on the store as it stands, and the median of each figure."""
    before = machine()
    runs = [serve(store, papers, queries) for _ in range(times)]

    def mid(get) -> float:
        return round(statistics.median(get(r) for r in runs), 1)

    return {
        "measured_at": time.ctime(),
        "papers": papers_in(store),
        "runs": runs,
        "median_of_runs": {
            "server_ready_s": mid(lambda r: r["server_ready_s"]),
            "first_answer_median_ms": mid(lambda r: r["first_answer_ms"]["median"]),
            "first_answer_p95_ms": mid(lambda r: r["first_answer_ms"]["p95"]),
            "full_list_median_ms": mid(lambda r: r["reranked_served_ms"]["median"]),
            "server_peak_rss_mb": mid(lambda r: r["server_peak_rss_mb"]),
            "server_peak_anon_mb": mid(lambda r: r["server_peak_anon_mb"]),
        },
        "machine_before": before,
        "machine_after": machine(),
    }


if __name__ == "__main__":
    main()
