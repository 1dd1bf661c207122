"""``citewise eval``: the offline evaluation collections (ACM-CR dev, ACL citances).

Kept apart from ``cli.py`` so the evaluation protocols can grow (a second collection, the reranker)
without touching the main command file; registered through ``cli._extra_registrations``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .settings import default_store_path


def _user_error(message: str) -> Exception:
    # The main module's class, so ``cli.main`` prints it as one line (imported late: cli imports us).
    from citewise.cli import UserError

    return UserError(message)


def cmd_eval(args: argparse.Namespace) -> int:
    from citewise.cli import _progress
    from citewise.indexer.importer import ImportError_, import_sources
    from citewise.models import evaluation as ev
    from citewise.models.recommender import Recommender

    if args.dataset != "acm-cr":
        raise _user_error(f"unknown dataset {args.dataset!r}")
    for flag in ("papers", "collection", "blacklist"):
        if not getattr(args, flag):
            raise _user_error(f"eval acm-cr needs --{flag}")
        if not Path(getattr(args, flag)).exists():
            raise _user_error(f"--{flag} {getattr(args, flag)}: no such file or folder")
    store_path = Path(args.store).expanduser() if args.store else default_store_path().with_name("acm-cr.sqlite")
    from citewise.indexer.store import Store

    store = Store(store_path)
    if store.count() == 0:
        print(f"building the store {store_path} from {args.collection} ...", file=sys.stderr)
        try:
            import_sources(store, [args.collection])
        except ImportError_ as exc:
            raise _user_error(str(exc)) from exc
    coll = ev.acmcr_collection(store, ev.load_blacklist(args.blacklist))
    doi_of, excluded = coll.doi_of, coll.excluded
    queries = ev.load_dev_queries(args.papers, coll.dois)
    if not queries:
        raise _user_error(f"{args.papers}: no citing-paper XML with queries found")
    rec = Recommender(store, prefetch_mode=args.prefetch)
    if args.prefetch in ("hatten", "hybrid") and rec.dense is None:
        raise _user_error("no HAtten index for this store: run `citewise index` with a model installed")
    prefetcher = rec.prefetcher(excluded)
    mode = rec.mode()
    depth = max(args.candidates, 1000)
    bar = _progress(len(queries), f"eval {mode}", " queries", args.quiet)
    latencies: list[float] = []

    def rank(q: ev.EvalQuery) -> list[str]:
        t = time.perf_counter()
        cands = prefetcher.candidates(q.query, depth, mode)
        if args.rerank and rec.second_stage is not None:
            head = cands[: args.candidates]
            papers = store.get_many([c.paper_id for c in head])
            cands = rec.second_stage.rerank(q.query, head, papers) + cands[args.candidates:]
        latencies.append(time.perf_counter() - t)
        return [doi_of[c.paper_id] for c in cands]

    metrics = ev.evaluate(rank, queries, on_query=lambda: bar.update(1))
    bar.close()
    latencies.sort()
    result = dict(metrics)
    print(ev.format_table({f"{mode}{' + rerank' if args.rerank and rec.second_stage else ''}": metrics}))
    print(f"{metrics['queries']} queries; median {1000 * latencies[len(latencies) // 2]:.1f} ms per query")
    if args.json:
        Path(args.json).write_text(json.dumps({k: result[k] for k in ev.METRIC_KEYS}, indent=2) + "\n")
    return 0


def register(subparsers) -> None:
    """Add ``eval`` to the main parser's subcommands."""
    p = subparsers.add_parser("eval", help="evaluate on ACM-CR dev (R@K, MRR, nDCG@10)")
    p.add_argument("dataset", choices=("acm-cr",))
    p.add_argument("--papers", help="folder of citing-paper XML files (searched recursively)")
    p.add_argument("--collection", help="folder of the ACM-CR BibTeX collection")
    p.add_argument("--blacklist", help="DOIs of the query papers, removed from the collection")
    p.add_argument("--store", help="store holding the collection (built from --collection when empty)")
    p.add_argument("--prefetch", choices=("auto", "bm25", "hatten", "hybrid"), default="auto")
    p.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--candidates", type=int, default=200, help="candidates handed to the reranker")
    p.add_argument("--json", metavar="FILE", help="write the metrics as JSON")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_eval)
