"""``citewise eval``: the offline evaluation collections (ACM-CR dev, ACL dev citances).

Kept apart from ``cli.py`` so the evaluation protocols can grow (a second collection, the reranker)
without touching the main command file; registered through ``cli._extra_registrations``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .cli_engine import add_engine_argument
from .settings import default_store_path


def _user_error(message: str) -> Exception:
    # The main module's class, so ``cli.main`` prints it as one line (imported late: cli imports us).
    from citewise.cli import UserError

    return UserError(message)


def _second_stage(args: argparse.Namespace, rec):
    """``--reranker DIR`` evaluates any exported reranker folder; otherwise the shipped default (if any)."""
    if not args.rerank:
        return None
    stage = rec.second_stage
    if args.reranker:
        from citewise.models.reranker import CrossEncoderReranker

        if not (Path(args.reranker) / "manifest.json").exists():
            raise _user_error(f"--reranker {args.reranker}: no manifest.json (export a checkpoint first)")
        stage = CrossEncoderReranker(args.reranker)
    settings = getattr(stage, "settings", None)
    if settings is not None and hasattr(settings, "max_candidates"):
        settings.max_candidates, settings.budget_s = args.candidates, args.budget
        if args.prefetch_weight is not None:
            settings.prefetch_weight = args.prefetch_weight
    return stage


def _open_eval_store(args: argparse.Namespace, default_name: str):
    from citewise.indexer.importer import ImportError_, import_sources
    from citewise.indexer.store import Store

    store_path = Path(args.store).expanduser() if args.store else default_store_path().with_name(default_name)
    store = Store(store_path)
    if store.count() == 0:
        print(f"building the store {store_path} from {args.collection} ...", file=sys.stderr)
        try:
            import_sources(store, [args.collection])
        except ImportError_ as exc:
            raise _user_error(str(exc)) from exc
    return store


def _check_paths(args: argparse.Namespace, flags: tuple[str, ...]) -> None:
    for flag in flags:
        if not getattr(args, flag):
            raise _user_error(f"eval {args.dataset} needs --{flag}")
        if not Path(getattr(args, flag)).exists():
            raise _user_error(f"--{flag} {getattr(args, flag)}: no such file or folder")


def cmd_eval(args: argparse.Namespace) -> int:
    """Both collections share one ranking loop: prefetch, then the second stage on the head."""
    from citewise.cli import _progress
    from citewise.models import evaluation as ev
    from citewise.models.recommender import Recommender

    if args.dataset == "acm-cr":
        _check_paths(args, ("papers", "collection", "blacklist"))
        store = _open_eval_store(args, "acm-cr.sqlite")
        coll = ev.acmcr_collection(store, ev.load_blacklist(args.blacklist))
        id_of, excluded_all = coll.doi_of, coll.excluded
        queries = ev.load_dev_queries(args.papers, coll.dois)
        own: dict[str, int] = {}
        if not queries:
            raise _user_error(f"{args.papers}: no citing-paper XML with queries found")
    elif args.dataset == "acl-citances":
        _check_paths(args, ("citances", "collection"))
        store = _open_eval_store(args, "acl.sqlite")
        id_of, excluded_all = ev.acl_ids(store), set()
        queries, own = ev.load_acl_dev_queries(args.citances, store)
        if not queries:
            raise _user_error(f"{args.citances}: no dev-split sentence cites a paper of the store")
    else:
        raise _user_error(f"unknown dataset {args.dataset!r}")
    if args.limit:
        queries = queries[: args.limit]
    rec = Recommender(store, prefetch_mode=args.prefetch, engine=args.engine)
    if args.prefetch in ("hatten", "hybrid") and rec.dense is None:
        raise _user_error(
            "no HAtten index for this store: run `citewise index --embed` with a model installed"
        )
    stage = _second_stage(args, rec)
    shared = rec.prefetcher(excluded_all)
    mode = rec.mode()
    depth = max(args.candidates, 1000)
    bar = _progress(len(queries), f"eval {mode}", " queries", args.quiet)
    latencies: list[float] = []

    def rank(q: ev.EvalQuery) -> list[str]:
        t = time.perf_counter()
        # The citing paper itself is never a candidate (ACL: per query; ACM-CR: the blacklist).
        prefetcher = rec.prefetcher(excluded_all | {own[q.citing_doi]}) if q.citing_doi in own else shared
        cands = prefetcher.candidates(q.query, depth, mode)
        if stage is not None:
            head = cands[: args.candidates]
            papers = store.get_many([c.paper_id for c in head])
            cands = stage.rerank(q.query, head, papers) + cands[args.candidates :]
        latencies.append(time.perf_counter() - t)
        return [id_of[c.paper_id] for c in cands]

    metrics = ev.evaluate(rank, queries, on_query=lambda: bar.update(1))
    bar.close()
    latencies.sort()
    result = dict(metrics)
    print(ev.format_table({f"{mode}{f' + rerank@{args.candidates}' if stage else ''}": metrics}))
    print(f"{metrics['queries']} queries; median {1000 * latencies[len(latencies) // 2]:.1f} ms per query")
    if args.json:
        Path(args.json).write_text(json.dumps({k: result[k] for k in ev.METRIC_KEYS}, indent=2) + "\n")
    return 0


def register(subparsers) -> None:
    """Add ``eval`` to the main parser's subcommands."""
    p = subparsers.add_parser("eval", help="evaluate on ACM-CR dev or the ACL dev split (R@K, MRR, nDCG@10)")
    p.add_argument("dataset", choices=("acm-cr", "acl-citances"))
    p.add_argument("--papers", help="acm-cr: folder of citing-paper XML files (searched recursively)")
    p.add_argument(
        "--citances", help="acl-citances: scisummnet-citances.jsonl (its 2013/2014 citing papers are used)"
    )
    p.add_argument("--collection", help="folder of the collection (ACM-CR BibTeX, or the ACL Anthology XML)")
    p.add_argument("--blacklist", help="DOIs of the query papers, removed from the collection")
    p.add_argument("--store", help="store holding the collection (built from --collection when empty)")
    p.add_argument("--prefetch", choices=("auto", "bm25", "hatten", "hybrid"), default="auto")
    p.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--candidates", type=int, default=200, help="candidates handed to the reranker")
    p.add_argument(
        "--reranker", metavar="DIR", help="an exported reranker folder (default: the shipped one, if any)"
    )
    p.add_argument("--budget", type=float, default=60.0, help="reranker seconds per query (default 60)")
    p.add_argument(
        "--prefetch-weight",
        type=float,
        help="fuse the reranker's rank with the prefetch rank "
        "(RRF weight; 0 = reranker order alone; default: the model manifest's)",
    )
    p.add_argument("--limit", type=int, help="evaluate only the first N queries (quick checks)")
    p.add_argument("--json", metavar="FILE", help="write the metrics as JSON")
    p.add_argument("-q", "--quiet", action="store_true")
    add_engine_argument(p)
    p.set_defaults(func=cmd_eval)
