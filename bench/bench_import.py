"""Import throughput on the real corpora into a fresh store (ACM-CR BibTeX, ACL Anthology XML).

Prints JSON with counts, seconds and papers/s per corpus, plus the machine's load. Usage:
    python bench/bench_import.py [--acm] [--acl] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _common import SHARED_DATA, machine

from citewise.indexer import bm25_files
from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store


def run(name: str, source: Path, folder: Path) -> dict:
    store = Store(folder / f"{name}.sqlite")
    t0 = time.perf_counter()
    stats = import_sources(store, [source])
    import_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    bm25_files.load_or_build(store)
    index_s = time.perf_counter() - t1
    info = store.info()
    return {
        **stats.as_dict(),
        "papers": info["papers"],
        "with_abstract": info["with_abstract"],
        "entry_types": info["entry_types"],
        "import_s": round(import_s, 1),
        "papers_per_s": round((stats.imported + stats.duplicates + stats.skipped) / import_s, 1),
        "bm25_build_s": round(index_s, 1),
        "store_mb": round(info["size_bytes"] / 1e6, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--acm", action="store_true")
    ap.add_argument("--acl", action="store_true")
    ap.add_argument("--keep", help="keep the stores in this folder")
    args = ap.parse_args()
    both = not (args.acm or args.acl)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="citewise-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    out: dict = {"machine_before": machine()}
    if args.acm or both:
        out["acm_cr"] = run("acm", SHARED_DATA / "acm-cr" / "acm-dl", folder)
    if args.acl or both:
        out["acl_anthology"] = run("acl", SHARED_DATA / "acl-anthology" / "xml", folder)
    out["machine_after"] = machine()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
