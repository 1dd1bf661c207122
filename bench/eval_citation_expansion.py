"""ACL dev (and ACM-CR dev) with and without citation expansion and the citation-count prior.

The four variants of ``docs/citation-expansion.md`` on one store, through the ranking loop of
``citewise eval`` (the same Prefetcher, the citing paper excluded from its own ranking): the
BM25 index is built in memory with the citing field on or off, the prior weight set on the
prefetch settings. Build the store first (``bench/acl_expanded_store.py``: dev years left out).

    python bench/eval_citation_expansion.py acl --store data/acl-expanded.sqlite
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from citewise.evaluation import protocol as ev
from citewise.indexer.bm25 import BM25Index, BM25Params
from citewise.indexer.store import Store
from citewise.models.prefetch import Prefetcher, PrefetchSettings
from citewise.models.recommender import Recommender

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
VARIANTS = {  # name -> (w_citing, prior_weight)
    "baseline": (0.0, 0.0),
    "+expansion": (1.0, 0.0),
    "+prior": (0.0, 0.5),
    "+both": (1.0, 0.5),
}


def _queries(
    dataset: str, store: Store
) -> tuple[list[ev.EvalQuery], dict[str, int], dict[int, str], set[int]]:
    if dataset == "acl":
        queries, own = ev.load_acl_dev_queries(SHARED / "citations" / "scisummnet-citances.jsonl", store)
        return queries, own, ev.acl_ids(store), set()
    coll = ev.acmcr_collection(store, ev.load_blacklist(SHARED / "acm-cr" / "blacklist.txt"))
    return ev.load_dev_queries(SHARED / "acm-cr" / "dev", coll.dois), {}, coll.doi_of, coll.excluded


def run(dataset: str, store: Store, variants: list[str]) -> dict[str, dict]:
    """Metrics of each variant (BM25 prefetch, no reranker)."""
    queries, own, id_of, excluded = _queries(dataset, store)
    rec = Recommender(store, use_dense=False, use_reranker=False)
    out: dict[str, dict] = {}
    indexes: dict[float, BM25Index] = {}
    for name in variants:
        w_citing, prior = VARIANTS[name]
        if w_citing not in indexes:
            indexes[w_citing] = BM25Index.from_store(store, BM25Params(w_citing=w_citing))
        settings = PrefetchSettings(prior_weight=prior)

        def prefetcher(extra: set[int], index=indexes[w_citing], settings=settings) -> Prefetcher:
            return Prefetcher(index, None, settings, excluded | extra, feedback_texts=rec.feedback_texts)

        shared = prefetcher(set())

        def rank(q: ev.EvalQuery, prefetcher=prefetcher, shared=shared) -> list[str]:
            p = prefetcher({own[q.citing_doi]}) if q.citing_doi in own else shared
            return [id_of[c.paper_id] for c in p.candidates(q.query, 1000, "bm25")]

        t0 = time.perf_counter()
        out[name] = ev.evaluate(rank, queries)
        out[name]["seconds"] = round(time.perf_counter() - t0, 1)
        out[name]["load"] = round(os.getloadavg()[0], 2)
        print(name, json.dumps(out[name]), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", choices=("acl", "acm-cr"))
    ap.add_argument("--store", required=True)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--json", help="write the metrics here")
    args = ap.parse_args()
    result = run(args.dataset, Store(args.store), args.variants)
    print(ev.format_table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
