"""ACM-CR dev metrics of a HAtten model folder: alone, BM25 views, and reciprocal-rank fusions.

Usage: python bench/eval_hatten.py --model runs/hatten-export --store .cache/acm.sqlite [--json out.json]

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
from typing import TYPE_CHECKING

from _common import REPO, SHARED_DATA

if TYPE_CHECKING:
    from citewise.indexer.ann import AnnIndex
    from citewise.indexer.bm25 import BM25Index
    from citewise.indexer.store import Store
    from citewise.models.hatten_onnx import HattenEncoder

DATA = SHARED_DATA / "acm-cr"


# The rows of the table: (label, ranked lists fused, RRF weights). One list is reported as it is.
_BM25_X3 = ["bm25:local", "bm25:local+title", "bm25:local+title+abstract"]
TABLE_ROWS: list[tuple[str, list[str], dict[str, float] | None]] = [
    ("BM25 local", ["bm25:local"], None),
    ("BM25 local+title", ["bm25:local+title"], None),
    ("BM25 local+title+abstract", ["bm25:local+title+abstract"], None),
    ("RRF BM25 x3", _BM25_X3, None),
    ("HAtten local+title+abstract", ["hatten"], None),
    ("HAtten local+title", ["hatten:local+title"], None),
    ("HAtten local", ["hatten:local"], None),
    ("RRF BM25 x3 + HAtten", _BM25_X3 + ["hatten"], None),
    ("RRF BM25 x3 + HAtten x2 (w)", _BM25_X3 + ["hatten"], {"hatten": 2.0}),
    ("RRF BM25 x3 + HAtten x0.5 (w)", _BM25_X3 + ["hatten"], {"hatten": 0.5}),
    ("RRF BM25 x3 + HAtten local+title", _BM25_X3 + ["hatten:local+title"], None),
    ("RRF BM25 x3 + HAtten + HAtten local", _BM25_X3 + ["hatten", "hatten:local"], None),
    ("RRF BM25 local+title + HAtten", ["bm25:local+title", "hatten"], None),
]
DEPTH = 1000  # ranks scored per query


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)

    from citewise.evaluation import protocol as ev
    from citewise.indexer import bm25 as bm25mod
    from citewise.indexer.store import Store
    from citewise.models.hatten_onnx import HattenEncoder

    store = Store(args.store, create=False)
    enc = HattenEncoder(args.model, precision=args.precision)
    ann, summary = _embed_store(store, enc, args)
    coll = ev.acmcr_collection(store, ev.load_blacklist(args.blacklist))
    queries = ev.load_dev_queries(args.dev, coll.dois)
    lists = _ranked_lists(queries, ann, bm25mod.load_or_build(store), coll.excluded)
    table = {
        label: _score(lists, queries, coll.doi_of, names, weights) for label, names, weights in TABLE_ROWS
    }
    print(ev.format_table(table))
    out = {
        "model": args.model,
        "model_hash": enc.model_hash,
        "precision": enc.precision,
        "exact": args.exact,
        "build": summary,
        "rows": table,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a HAtten model folder (citewise export writes one)")
    ap.add_argument("--store", default=str(REPO / ".cache" / "acm.sqlite"))
    ap.add_argument("--dev", default=str(DATA / "dev"))
    ap.add_argument("--blacklist", default=str(DATA / "blacklist.txt"))
    ap.add_argument("--ann-folder")
    ap.add_argument("--exact", action="store_true", help="exact cosine instead of the hnsw index")
    ap.add_argument("--precision", default=None, help="int8 (default from manifest) or fp32")
    ap.add_argument("--json")
    return ap.parse_args(argv)


def _embed_store(store: Store, enc: HattenEncoder, args: argparse.Namespace) -> tuple[AnnIndex, dict]:
    """Embed the store with the model (resumable) and return the index with its build summary.

    The folder is named after the model hash by default, so evaluating several models never
    mixes their vectors; progress goes to stderr at most every 30 s (embedding takes minutes)."""
    from citewise.indexer.ann import AnnIndex

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
    return ann, summary


def _ranked_lists(
    queries: list, ann: AnnIndex, bm: BM25Index, excluded: set[int]
) -> list[dict[str, list[tuple[int, float]]]]:
    """Every query's top ``DEPTH`` by each HAtten and BM25 view, computed once so the table's
    fusions only re-rank them. Excluded papers (the blacklist, as in ACM-CR) never count: the
    dense search asks for that many more hits and drops them, BM25 masks them."""
    from citewise.models.prefetch import view_text
    from citewise.models.query import ContextQuery

    mask = bm.mask_for(excluded, allowed=False)

    def dense(q: ContextQuery) -> list[tuple[int, float]]:
        hits = ann.search_query(q, DEPTH + len(excluded))
        return [(p, s) for p, s in hits if p not in excluded][:DEPTH]

    lists: list[dict[str, list[tuple[int, float]]]] = []
    for q in queries:
        d = {
            "hatten": dense(q.query),
            "hatten:local": dense(ContextQuery(q.query.local)),
            "hatten:local+title": dense(ContextQuery(q.query.local, q.query.citing_title)),
        }
        for view in ("local", "local+title", "local+title+abstract"):
            d[f"bm25:{view}"] = bm.search(view_text(q.query, view), DEPTH, mask=mask)
        lists.append(d)
    return lists


def _score(
    lists: list[dict[str, list[tuple[int, float]]]],
    queries: list,
    doi_of: dict[int, str],
    names: list[str],
    weights: dict[str, float] | None,
) -> dict[str, float]:
    """Dev metrics of the ranked lists ``names`` (one as it is, several fused by RRF, k=60)."""
    from citewise.evaluation import protocol as ev
    from citewise.models.prefetch import rrf

    def rank_of(i: int) -> list[str]:
        sel = {n: lists[i][n] for n in names}
        if len(sel) == 1:
            return [doi_of[p] for p, _ in next(iter(sel.values()))]
        return [doi_of[c.paper_id] for c in rrf(sel, 60.0, weights)][:DEPTH]

    per = [ev.query_metrics(rank_of(i), q.relevant) for i, q in enumerate(queries)]
    return ev.aggregate(per)


if __name__ == "__main__":
    sys.exit(main())
