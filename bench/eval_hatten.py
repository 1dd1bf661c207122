"""ACM-CR dev metrics of a HAtten model folder: alone, BM25 views, and reciprocal-rank fusions.

Usage: python bench/eval_hatten.py --model models/default --store .cache/acm.sqlite [--json out.json]

Embeds the store with the model (resumable, in ``--ann-folder``, default ``<store>.hatten-<hash>``),
then ranks the dev queries (top 1000) with: HAtten (local + global), HAtten (local only), the three
BM25 views, and RRF fusions. Dev is used for model selection only, never for training.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from _common import REPO, SHARED_DATA

DATA = SHARED_DATA / "acm-cr"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(REPO / "models" / "default"))
    ap.add_argument("--store", default=str(REPO / ".cache" / "acm.sqlite"))
    ap.add_argument("--dev", default=str(DATA / "dev"))
    ap.add_argument("--blacklist", default=str(DATA / "blacklist.txt"))
    ap.add_argument("--ann-folder")
    ap.add_argument("--exact", action="store_true", help="exact cosine instead of the hnsw index")
    ap.add_argument("--precision", default=None, help="int8 (default from manifest) or fp32")
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    from citewise.indexer import bm25 as bm25mod
    from citewise.indexer.ann import AnnIndex
    from citewise.indexer.store import Store
    from citewise.models import evaluation as ev
    from citewise.models.hatten_onnx import HattenEncoder
    from citewise.models.prefetch import rrf, view_text
    from citewise.models.query import ContextQuery

    store = Store(args.store, create=False)
    enc = HattenEncoder(args.model, precision=args.precision)
    folder = args.ann_folder or f"{args.store}.hatten-{enc.model_hash}"
    ann = AnnIndex(store, enc, folder=folder, exact_below=10**9 if args.exact else 5000)
    t0 = time.time()
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if time.time() - last[0] > 30 or done == total:
            last[0] = time.time()
            rate = done / max(time.time() - t0, 1e-6)
            print(f"embedded {done}/{total} ({rate:.0f} papers/s)", file=sys.stderr, flush=True)

    summary = ann.build(progress)
    print(json.dumps({"build": summary}), file=sys.stderr)

    coll = ev.acmcr_collection(store, ev.load_blacklist(args.blacklist))
    doi_of, excluded = coll.doi_of, coll.excluded
    queries = ev.load_dev_queries(args.dev, coll.dois)
    bm = bm25mod.load_or_build(store)
    mask = ~bm.mask_for(excluded)
    depth = 1000

    def dense(q: ContextQuery) -> list[tuple[int, float]]:
        hits = ann.search_query(q, depth + len(excluded))
        return [(p, s) for p, s in hits if p not in excluded][:depth]

    lists: list[dict[str, list[tuple[int, float]]]] = []
    for q in queries:
        d = {
            "hatten": dense(q.query),
            "hatten:local": dense(ContextQuery(q.query.local)),
            "hatten:local+title": dense(ContextQuery(q.query.local, q.query.citing_title)),
        }
        for view in ("local", "local+title", "local+title+abstract"):
            d[f"bm25:{view}"] = bm.search(view_text(q.query, view), depth, mask=mask)
        lists.append(d)

    def run(names: list[str], weights: dict[str, float] | None = None) -> dict[str, float]:
        def rank_of(i: int) -> list[str]:
            sel = {n: lists[i][n] for n in names}
            if len(sel) == 1:
                return [doi_of[p] for p, _ in next(iter(sel.values()))]
            return [doi_of[c.paper_id] for c in rrf(sel, 60.0, weights)][:depth]

        per = [ev.query_metrics(rank_of(i), q.relevant) for i, q in enumerate(queries)]
        return ev.aggregate(per)

    bm3 = ["bm25:local", "bm25:local+title", "bm25:local+title+abstract"]
    table = {
        "BM25 local": run(["bm25:local"]),
        "BM25 local+title": run(["bm25:local+title"]),
        "BM25 local+title+abstract": run(["bm25:local+title+abstract"]),
        "RRF BM25 x3": run(bm3),
        "HAtten local+title+abstract": run(["hatten"]),
        "HAtten local+title": run(["hatten:local+title"]),
        "HAtten local": run(["hatten:local"]),
        "RRF BM25 x3 + HAtten": run(bm3 + ["hatten"]),
        "RRF BM25 x3 + HAtten x2 (w)": run(bm3 + ["hatten"], {"hatten": 2.0}),
        "RRF BM25 x3 + HAtten x0.5 (w)": run(bm3 + ["hatten"], {"hatten": 0.5}),
        "RRF BM25 x3 + HAtten local+title": run(bm3 + ["hatten:local+title"]),
        "RRF BM25 x3 + HAtten + HAtten local": run(bm3 + ["hatten", "hatten:local"]),
        "RRF BM25 local+title + HAtten": run(["bm25:local+title", "hatten"]),
    }
    print(ev.format_table(table))
    out = {"model": args.model, "model_hash": enc.model_hash, "precision": enc.precision,
           "exact": args.exact, "build": summary, "rows": table}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
