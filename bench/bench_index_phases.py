"""Where ``citewise index`` spends its time, phase by phase: importing, the search index (BM25),
embedding papers, the nearest-neighbour index, embedding citing texts; with peak RSS and the
machine's load, since on a shared two-core machine the load moves every figure.

Each run indexes the sources into a fresh store (``--runs`` times; the median of each phase is
printed, with every run's figures) with stderr to a pipe, so ``citewise index`` prints its plain
progress lines (``citewise: PHASE: started ...`` / ``... done ...``); a phase's time is the time
between its two lines as read here, and its CPU seconds (``/proc``: the index process's threads and
the parser processes of the import), the figure the load moves least. Peak RSS is the child's own (``os.wait4``: the index process
and the parser processes it waited for). The load is sampled every 5 s while the run lasts.

    python bench/bench_index_phases.py ../shared/data/acm-cr/acm-dl --runs 3 > phases.json

Extra arguments after ``--`` go to ``citewise index`` (``-- --no-embed``). ``--from-store STORE``
measures the phases after the import only: each run copies an imported store (the SQLite file
alone, none of its indexes) and runs ``citewise index --store COPY`` with no files, so the search
index, the embeddings and the graph are built from scratch without paying for the import again:

    python bench/bench_index_phases.py --from-store /work/stores/acmcr.sqlite --runs 1
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PHASE_LINE = re.compile(r"^citewise: (?P<phase>[a-z][a-z -]*): (?P<what>started|done)\b")


class _Watch:
    """Samples while a run lasts: the 1-minute load every 5 s, and the index process's resident
    memory every 0.5 s, the highest kept per phase (``phase``: the one the reader last saw start;
    "between" outside any), so the phase that sets the peak RSS is named."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.phase = "start-up"
        self.loads: list[float] = []
        self.rss_mb: dict[str, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _rss_mb(self) -> int:
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return 0
        m = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        return int(m.group(1)) // 1024 if m else 0

    def _run(self) -> None:
        tick = 0
        while not self.stop.wait(0.5 if tick else 0):
            if tick % 10 == 0:
                self.loads.append(os.getloadavg()[0])
            rss = self._rss_mb()
            self.rss_mb[self.phase] = max(self.rss_mb.get(self.phase, 0), rss)
            tick += 1

    def done(self) -> None:
        self.stop.set()
        self.thread.join()


def _cpu_seconds(pid: int) -> float:
    """CPU seconds of process ``pid`` so far: its threads, and the children it has waited for
    (user + system; 0 once it is gone). Unlike wall time, barely moved by the machine's load."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _read_phases(stream, t0: float, watch: _Watch, tail: list[str]) -> dict[str, dict[str, float]]:
    """Each phase's start and end (wall seconds after ``t0``, and CPU seconds of the index
    process and its parser processes) from the plain progress lines."""
    phases: dict[str, dict[str, float]] = {}
    pid = watch.pid
    children = [pid]
    for line in stream:
        now = time.monotonic() - t0
        tail.append(line.rstrip("\n"))
        del tail[:-20]
        m = PHASE_LINE.match(line)
        if m:
            children = [pid, *_children(pid)] if m["phase"] == "importing" else children
            cpu = sum(_cpu_seconds(p) for p in children)
            phases.setdefault(m["phase"], {})[m["what"]] = round(now, 2)
            watch.phase = m["phase"] if m["what"] == "started" else "between"
            phases[m["phase"]][f"{m['what']}_cpu"] = round(cpu, 2)
    return phases


def _children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (the import's parser processes)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def run_once(sources: list[str], extra: list[str], work: Path, from_store: Path | None = None) -> dict:
    """One ``citewise index`` into a new store under ``work`` (a copy of ``from_store``'s SQLite
    file when given): phases, total, peak RSS, load."""
    store = work / "bench.sqlite"
    if from_store is not None:
        _copy_store(from_store, store)
    cmd = [sys.executable, "-m", "citewise.cli", "index", *sources, "--store", str(store), "--json", *extra]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watch = _Watch(proc.pid)
    tail: list[str] = []
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
    reader.start()
    phases = _read_phases(proc.stderr, t0, watch, tail)
    watch.done()
    _, status, usage = os.wait4(proc.pid, 0)
    total = time.monotonic() - t0
    reader.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("citewise index failed:\n" + "\n".join(tail))
    seconds = {
        name: round(p["done"] - p["started"], 1)
        for name, p in phases.items()
        if "started" in p and "done" in p
    }
    cpu = {
        name: round(p["done_cpu"] - p["started_cpu"], 1)
        for name, p in phases.items()
        if "started_cpu" in p and "done_cpu" in p
    }
    counted = sum(seconds.values())
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "cpu_total_seconds": round((usage.ru_utime + usage.ru_stime), 1),
        "total_seconds": round(total, 1),
        "outside_phases_seconds": round(total - counted, 1),  # start-up, model loading, summary
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "rss_mb_by_phase": watch.rss_mb,  # sampled every 0.5 s: the short peaks may be missed
        "load": {"mean": round(statistics.fmean(watch.loads), 2), "max": round(max(watch.loads), 2)},
        "summary": json.loads(out[0]) if out and out[0].strip() else {},
    }


def _copy_store(source: Path, to: Path) -> None:
    """The store's SQLite file, consistent even while another process reads it (SQLite's backup
    API folds the write-ahead log in), without its search, embedding or citing-text indexes."""
    import sqlite3

    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    dst = sqlite3.connect(to)
    with dst:
        src.backup(dst)
    src.close()
    dst.close()


def _median(runs: list[dict]) -> dict:
    phases = sorted({name for r in runs for name in r["seconds"]})
    return {
        "seconds": {n: statistics.median(r["seconds"].get(n, 0.0) for r in runs) for n in phases},
        "cpu_seconds": {n: statistics.median(r["cpu_seconds"].get(n, 0.0) for r in runs) for n in phases},
        "cpu_total_seconds": statistics.median(r["cpu_total_seconds"] for r in runs),
        "total_seconds": statistics.median(r["total_seconds"] for r in runs),
        "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
        "load_mean": statistics.median(r["load"]["mean"] for r in runs),
    }


def main(argv: list[str] | None = None) -> int:
    """Index the sources ``--runs`` times, print the median and every run as JSON."""
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="*", help="what `citewise index` imports")
    ap.add_argument("--from-store", type=Path, help="an imported store: measure the phases after the import")
    ap.add_argument("--runs", type=int, default=1, help="runs (the median is printed; default 1)")
    ap.add_argument("--work", help="folder for the stores (default: a temporary one, removed)")
    args = ap.parse_args(argv)
    if not args.sources and args.from_store is None:
        ap.error("give the sources to import, or --from-store STORE")
    runs = []
    for i in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="bench-index-", dir=args.work))
        try:
            runs.append(run_once(args.sources, extra, work, args.from_store))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"run {i + 1}: {json.dumps(runs[-1]['seconds'])}", file=sys.stderr)
    for r in runs:
        r["summary"] = {k: v for k, v in r["summary"].items() if not isinstance(v, dict | list)}
    print(json.dumps({"cpus": os.cpu_count(), "median": _median(runs), "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
