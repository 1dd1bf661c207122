"""Import throughput and memory for the open sources (issue 25): OpenAlex works, S2AG papers and
citations, arXiv snapshot lines, streamed from generated ``.gz`` files shaped like the real samples.

Each source's file is written from the real records of ``shared/data/samples`` (every generated
record is a sample record with new ids, a varied title and references into the generated id
range, so it is as big as the real one and about a fifth of the references resolve), then
imported into a fresh store by ``citewise.indexer.importer.import_sources`` in a child process of
its own, whose peak RSS is its ``ru_maxrss``. Prints JSON: records, seconds, records/s (the
import, then the citation resolution after it), peak RSS, store size, and the load average.
Targets (issue 25): >= 5,000 records/s, < 1 GB RSS whatever the file size.

    python bench/bench_import_sources.py                 # 200,000 records a source
    python bench/bench_import_sources.py -n 20000        # a quick look
    python bench/bench_import_sources.py --millions 2    # 2,000,000 records a source
    python bench/bench_import_sources.py --sources openalex arxiv --keep /tmp/bench
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from _common import SHARED_DATA, machine

SAMPLES = SHARED_DATA / "samples"
SOURCES = ("openalex", "s2ag-papers", "s2ag-citations", "arxiv")
_WORDS = "graph neural sparse robust adaptive latent causal federated bayesian contrastive".split()


def _vary(title: str, i: int, rng: random.Random) -> str:
    """A title of the template's length that differs per record (duplicate titles would merge)."""
    return f"{title} {rng.choice(_WORDS)} {i}"


def _own_arxiv(location: dict | None, url: str) -> dict | None:
    if isinstance(location, dict) and "arxiv.org" in str(location.get("landing_page_url")):
        return {**location, "landing_page_url": url}
    return location


def _openalex(n: int, rng: random.Random) -> Iterator[dict]:
    page = json.loads((SAMPLES / "openalex" / "works_api_page_peneira_2024.json").read_text(encoding="utf-8"))
    templates = page["results"]
    for i in range(n):
        work = copy.copy(templates[i % len(templates)])
        wid = 4_000_000_000 + i
        work["id"] = f"https://openalex.org/W{wid}"
        work["doi"] = f"https://doi.org/10.5555/bench.{i}"
        work["ids"] = {"openalex": work["id"], "doi": work["doi"], "mag": str(wid)}
        work["title"] = work["display_name"] = _vary(work.get("title") or "Untitled", i, rng)
        # Locations on arxiv.org give the work an arXiv id: one of its own, not its template's.
        arxiv_url = f"https://arxiv.org/abs/{2001 + i // 99_999 % 1000:04d}.{i % 99_999 + 1:05d}"
        work["locations"] = [_own_arxiv(loc, arxiv_url) for loc in work.get("locations") or []]
        work["primary_location"] = _own_arxiv(work.get("primary_location"), arxiv_url)
        refs = len(work.get("referenced_works") or [])
        work["referenced_works"] = [
            f"https://openalex.org/W{4_000_000_000 + rng.randrange(n * 5)}" for _ in range(refs)
        ]
        yield work


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _s2ag_papers(n: int, rng: random.Random) -> Iterator[dict]:
    templates = _jsonl(SAMPLES / "s2ag" / "papers" / "papers-sample.jsonl")
    for i in range(n):
        row = copy.copy(templates[i % len(templates)])
        row["corpusid"] = 300_000_000 + i
        ext = {**row["externalids"], "CorpusId": str(row["corpusid"]), "MAG": str(i)}
        if ext.get("DOI"):
            ext["DOI"] = f"10.5555/s2-bench.{i}"
        row["externalids"] = ext
        row["title"] = _vary(row["title"], i, rng)
        yield row


def _s2ag_citations(n: int, rng: random.Random) -> Iterator[dict]:
    templates = _jsonl(SAMPLES / "s2ag" / "citations" / "citations-sample.jsonl")
    for i in range(n):
        row = copy.copy(templates[i % len(templates)])
        row["citingcorpusid"] = str(300_000_000 + rng.randrange(n))
        row["citedcorpusid"] = str(300_000_000 + rng.randrange(n)) if row["citedcorpusid"] else None
        yield row


def _arxiv(n: int, rng: random.Random) -> Iterator[dict]:
    templates = _jsonl(SAMPLES / "arxiv" / "arxiv-metadata-oai-snapshot.first200.jsonl")
    for i in range(n):
        row = copy.copy(templates[i % len(templates)])
        row["id"] = f"{1001 + (i // 99_999) % 1000:04d}.{i % 99_999 + 1:05d}"
        row["title"] = _vary(row["title"], i, rng)
        row["doi"] = f"10.5555/arxiv-bench.{i}" if row.get("doi") else None
        yield row


GENERATORS: dict[str, Callable[[int, random.Random], Iterator[dict]]] = {
    "openalex": _openalex,
    "s2ag-papers": _s2ag_papers,
    "s2ag-citations": _s2ag_citations,
    "arxiv": _arxiv,
}


def generate(source: str, n: int, folder: Path) -> tuple[Path, float]:
    """Write ``n`` records of ``source`` to a gzip file (JSON Lines); returns it and seconds."""
    path = folder / f"{source}-{n}.jsonl.gz"
    t0 = time.perf_counter()
    rng = random.Random(25)
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as fh:
        for record in GENERATORS[source](n, rng):
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path, time.perf_counter() - t0


def child(path: Path, store_path: Path, n: int) -> dict:
    """Import one file into a fresh store (in this process: its peak RSS is the import's)."""
    from citewise.indexer.importer import import_sources
    from citewise.indexer.store import Store

    store = Store(store_path)
    resolve_s = 0.0
    plain_resolve = store.resolve_citations

    def timed_resolve() -> int:
        nonlocal resolve_s
        t = time.perf_counter()
        try:
            return plain_resolve()
        finally:
            resolve_s += time.perf_counter() - t

    store.resolve_citations = timed_resolve  # type: ignore[method-assign]
    t0 = time.perf_counter()
    stats = import_sources(store, [path])
    total_s = time.perf_counter() - t0
    import_s = total_s - resolve_s
    info = store.info()
    own, parser = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "records": n,
        **{k: v for k, v in stats.as_dict().items() if v},
        "papers": info["papers"],
        "import_s": round(import_s, 1),
        "records_per_s": round(n / import_s),
        "resolve_citations_s": round(resolve_s, 1),
        "records_per_s_with_resolution": round(n / total_s),
        "peak_rss_mb": round(own.ru_maxrss / 1024),
        # The parser process that reads large files ahead (indexer/sources/pipeline.py), if any.
        "parser_peak_rss_mb": round(parser.ru_maxrss / 1024),
        # CPU seconds of the writer (this process) and of the parser: what a record costs each
        # side, which load from other processes changes less than the wall-clock rate.
        "cpu_s": round(own.ru_utime + own.ru_stime, 1),
        "parser_cpu_s": round(parser.ru_utime + parser.ru_stime, 1),
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "store_mb": round(info["size_bytes"] / 1e6, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=200_000, help="records a source (default 200,000)")
    ap.add_argument("--millions", type=float, help="records a source, in millions (overrides -n)")
    ap.add_argument("--sources", nargs="+", choices=SOURCES, default=list(SOURCES))
    ap.add_argument("--keep", help="write the files and stores here and keep them")
    ap.add_argument("--child", nargs=3, metavar=("FILE", "STORE", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), Path(args.child[1]), int(args.child[2]))))
        return
    if not SAMPLES.exists():
        sys.exit(f"the samples are not at {SAMPLES} (set CITEWISE_SHARED_DATA)")
    n = int(args.millions * 1_000_000) if args.millions else args.n
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="citewise-bench-sources-"))
    folder.mkdir(parents=True, exist_ok=True)
    out: dict = {"records_per_source": n, "machine_before": machine(), "sources": {}}
    for source in args.sources:
        path, gen_s = generate(source, n, folder)
        store_path = folder / f"{source}.sqlite"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{store_path}{suffix}").unlink(missing_ok=True)
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(path), str(store_path), str(n)],
            capture_output=True,
            text=True,
            check=True,
        )
        out["sources"][source] = {**json.loads(done.stdout), "generate_s": round(gen_s, 1)}
        out["sources"][source]["machine_after"] = machine()
        if not args.keep:
            path.unlink()
            for suffix in ("", "-wal", "-shm"):
                Path(f"{store_path}{suffix}").unlink(missing_ok=True)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
