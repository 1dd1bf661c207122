"""A 50k-paper ``.bib`` added to a big store: is the search index layered (a delta) rather than
rebuilt, and do keystroke queries stay fast while it happens? (JSON)

The store is a copy of ``--store`` (e.g. the 1M-paper store of ``bench/bench_scale.py``); the
``.bib`` is written from generated papers the store does not hold (``bench/make_scale_corpus.py
--id-prefix new``). In one process, as in the language server: a worker thread runs what the
server's index pool runs when a workspace ``.bib`` changes (``server.jobs.refresh``: the import,
then a new ``Recommender`` whose BM25 index is the saved base plus a delta), while the main thread
asks the keystroke path (the fast BM25 view) every 0.25 s on the current recommender and times
it, GIL contention included. Then a query made of a new paper's title must find it.

    python bench/bench_add_bib_to_big_store.py --store runs/scale/store.sqlite --jsonl runs/scale/new50k.jsonl
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, summary  # noqa: E402

from citewise.indexer.bibtex_writer import format_entry  # noqa: E402
from citewise.indexer.jsonl import record_from_json  # noqa: E402
from citewise.indexer.store import Store  # noqa: E402
from citewise.models.query import ContextQuery  # noqa: E402
from citewise.models.recommender import Recommender  # noqa: E402
from citewise.server.jobs import refresh  # noqa: E402


def bib_from_jsonl(path: Path, n: int) -> tuple[str, list[dict]]:
    """BibTeX entries (with abstracts, as reference managers export them) of the first ``n``
    records, written by citewise's own BibTeX writer under the records' ids."""
    records = []
    with path.open(encoding="utf-8") as f:
        for _, line in zip(range(n), f, strict=False):
            records.append(json.loads(line))
    entries = [
        format_entry(record_from_json(r, str(path), i + 1), r["id"], include_abstract=True, fields="full")
        for i, r in enumerate(records)
    ]
    return "\n".join(entries), records


def run(store_path: Path, bib: Path, probes: list[dict]) -> dict:
    store = Store(store_path, create=False)
    rec = Recommender(store)
    before = rec.library.count()
    result: dict = {}

    def work() -> None:
        t = time.perf_counter()
        out = refresh(store, [str(bib)])
        result.update(
            seconds=time.perf_counter() - t,
            imported=out.imported,
            recommender=out.recommender,
        )

    worker = threading.Thread(target=work)
    query = ContextQuery("dense retrieval of passages for open-domain question answering")
    t0 = time.perf_counter()
    worker.start()
    latencies = []
    while worker.is_alive():
        t = time.perf_counter()
        rec.prefetch(query, 20, fast=True)
        latencies.append(time.perf_counter() - t)
        time.sleep(0.25)
    worker.join()
    new = result["recommender"]
    index = new.bm25
    ranks = []
    for p in probes:
        pid = new.library.by_key(p["id"])
        hits = new.prefetch(ContextQuery(p["title"]), 10, fast=True)
        ids = [c.paper_id for c in hits]
        ranks.append(ids.index(pid.id) + 1 if pid is not None and pid.id in ids else None)
    return {
        "papers_before": before,
        "imported": result["imported"],
        "import_and_index_s": round(result["seconds"], 1),
        "index": {
            "layered_delta": index.delta_size > 0,
            "delta_papers": index.delta_size,
            "full_rebuild": hasattr(index, "build_seconds"),
        },
        "keystrokes_during": summary(latencies),
        "new_papers_found_by_title_in_top10": f"{sum(r is not None for r in ranks)}/{len(ranks)}",
        "their_ranks": ranks,
        "total_s": round(time.perf_counter() - t0, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True, help="the big store (copied, never changed)")
    ap.add_argument(
        "--jsonl", required=True, help="papers the store does not hold (make_scale_corpus --id-prefix new)"
    )
    ap.add_argument("--entries", type=int, default=50_000)
    args = ap.parse_args()
    bib_text, records = bib_from_jsonl(Path(args.jsonl), args.entries)
    src = Path(args.store)
    with tempfile.TemporaryDirectory(dir=src.parent) as tmp:
        store = Path(tmp) / src.name
        shutil.copyfile(src, store)
        shutil.copytree(src.with_name(src.name + ".bm25"), store.with_name(store.name + ".bm25"))
        bib = Path(tmp) / "refs.bib"
        bib.write_text(bib_text, encoding="utf-8")
        out = {"machine_before": machine(), "entries": len(records), "bib_mb": round(len(bib_text) / 1e6, 1)}
        out.update(run(store, bib, records[:: max(1, len(records) // 20)]))
    out["machine_after"] = machine()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
