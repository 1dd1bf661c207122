"""Store growth per record of each open source: the constants behind ``citewise index``'s size
estimate (``indexer/estimate.py``, ``STORE_BYTES`` and ``INDEX_BYTES``).

Why measured on generated files: the samples hold 20-200 records, and a store of so few is mostly
its fixed pages. Each source's records are written from its real sample records with new ids and
titles (``bench_import_sources.py``'s generators, and the same idea here for Crossref, unarXive and
S2AG abstracts), imported into a store that already holds the sample once (so the fixed pages are
paid), and the growth of the SQLite file (after a checkpoint) and of the BM25 index folder beside
it is divided by the records imported. Prints JSON; the figures go into ``indexer/estimate.py``.

    python bench/bench_store_growth.py              # 20,000 records a source
    python bench/bench_store_growth.py -n 5000 --sources crossref unarxive
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from _common import machine
from bench_import_sources import GENERATORS, SAMPLES, _jsonl, _vary


def _crossref(n: int, rng: random.Random) -> Iterator[dict]:
    templates = _jsonl(SAMPLES / "crossref" / "works_query_ecology_boettiger_20items.jsonl")
    for i in range(n):
        work = copy.copy(templates[i % len(templates)])
        work["DOI"] = f"10.5555/crossref-bench.{i}"
        work["title"] = [_vary((work.get("title") or ["Untitled"])[0], i, rng)]
        yield work


def _unarxive(n: int, rng: random.Random) -> Iterator[dict]:
    templates = _jsonl(SAMPLES / "unarxive" / "arXiv_src_2212_086.jsonl")
    for i in range(n):
        paper = copy.copy(templates[i % len(templates)])
        meta = {**paper["metadata"], "id": f"{3001 + i // 99_999:04d}.{i % 99_999 + 1:05d}", "doi": None}
        meta["title"] = _vary(meta.get("title") or "Untitled", i, rng)
        paper["metadata"] = meta
        yield paper


def _s2ag_abstracts(n: int, rng: random.Random) -> Iterator[dict]:
    templates = _jsonl(SAMPLES / "s2ag" / "abstracts" / "abstracts-sample.jsonl")
    for i in range(n):
        yield {**templates[i % len(templates)], "corpusid": 300_000_000 + i}


MORE: dict[str, Callable[[int, random.Random], Iterator[dict]]] = {
    "crossref": _crossref,
    "unarxive": _unarxive,
    "s2ag-abstracts": _s2ag_abstracts,
}
ALL = {**GENERATORS, **MORE}
BASES = {  # the sample imported first, so the store's fixed pages are paid before measuring
    "openalex": ("openalex", "works_api_page_peneira_2024.json"),
    "s2ag-papers": ("s2ag", "papers", "papers-sample.jsonl"),
    "s2ag-citations": ("s2ag", "papers", "papers-sample.jsonl"),
    "s2ag-abstracts": ("s2ag", "papers", "papers-sample.jsonl"),
    "arxiv": ("arxiv", "arxiv-metadata-oai-snapshot.first200.jsonl"),
    "crossref": ("crossref", "works_query_ecology_boettiger_20items.jsonl"),
    "unarxive": ("arxiv", "arxiv-metadata-oai-snapshot.first200.jsonl"),
}


def _sizes(store_path: Path) -> tuple[int, int]:
    """The store file (checkpointed) and its BM25 index folder, in bytes, rebuilt in full."""
    from citewise.indexer import bm25_files
    from citewise.indexer.store import Store

    store = Store(store_path)
    bm25_files.load_or_build(store, allow_delta=False)
    folder = bm25_files.index_folder(store)
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    index = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0
    return store_path.stat().st_size, index


def measure(source: str, n: int, folder: Path) -> dict:
    from citewise.indexer.importer import import_sources
    from citewise.indexer.store import Store

    path = folder / f"{source}-{n}.jsonl.gz"
    rng = random.Random(25)
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as fh:
        for record in ALL[source](n, rng):
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    store_path = folder / f"{source}.sqlite"
    store = Store(store_path)
    import_sources(store, [SAMPLES.joinpath(*BASES[source])])
    store.close()
    store_0, index_0 = _sizes(store_path)
    store = Store(store_path)
    stats = import_sources(store, [path])
    store.close()
    store_1, index_1 = _sizes(store_path)
    return {
        "records": n,
        "stats": {k: v for k, v in stats.as_dict().items() if v},
        "file_bytes_per_record_gzip6": round(path.stat().st_size / n),
        "store_bytes_per_record": round((store_1 - store_0) / n),
        "index_bytes_per_record": round((index_1 - index_0) / n),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=20_000, help="records a source (default 20,000)")
    ap.add_argument("--sources", nargs="+", choices=sorted(ALL), default=sorted(ALL))
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="citewise-bench-growth-"))
    out: dict = {"machine": machine(), "sources": {}}
    try:
        for source in args.sources:
            out["sources"][source] = measure(source, args.n, folder)
            print(json.dumps({source: out["sources"][source]}), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
