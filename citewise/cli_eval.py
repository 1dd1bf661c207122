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

from .cli_common import add_prefetch_argument
from .cli_engine import add_engine_argument
from .settings import default_store_path


def _user_error(message: str) -> Exception:
    # The main module's class, so ``cli.main`` prints it as one line (imported late: cli imports us).
    from .cli_common import UserError

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
        # Without --candidates the eval reranks what the editor reranks (the model manifest's
        # number): the figures are the default pipeline's.
        if args.candidates is None:
            args.candidates = settings.max_candidates
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


def _dataset(args: argparse.Namespace):
    """The store, its id -> DOI / Anthology id map, the ids outside the collection, and one query
    loader per protocol (each returns the queries and the citing papers' own store ids)."""
    from citewise.evaluation import placeholders as ep
    from citewise.evaluation import protocol as ev

    if args.dataset == "acm-cr":
        _check_paths(args, ("papers", "collection", "blacklist"))
        store = _open_eval_store(args, "acm-cr.sqlite")
        coll = ev.acmcr_collection(store, ev.load_blacklist(args.blacklist))
        loaders = {
            "sentence": lambda: (ev.load_dev_queries(args.papers, coll.dois), {}),
            "placeholder": lambda: (ep.load_dev_queries(args.papers, coll.dois), {}),
        }
        return (
            store,
            coll.doi_of,
            coll.excluded,
            loaders,
            f"{args.papers}: no citing-paper XML with queries found",
        )
    if args.dataset == "acl-citances":
        _check_paths(args, ("citances", "collection"))
        store = _open_eval_store(args, "acl.sqlite")
        loaders = {
            "sentence": lambda: ev.load_acl_dev_queries(args.citances, store),
            "placeholder": lambda: ep.acl_placeholder_queries(args.citances, store),
        }
        empty = f"{args.citances}: no dev-split sentence cites a paper of the store"
        return store, ev.acl_ids(store), set(), loaders, empty
    raise _user_error(f"unknown dataset {args.dataset!r}")


def cmd_eval(args: argparse.Namespace) -> int:
    """Both collections share one ranking loop: prefetch, then the second stage on the head; each
    protocol (sentence, per placeholder) runs it over its own queries."""
    from citewise.evaluation import placeholders as ep
    from citewise.evaluation import protocol as ev
    from citewise.models.recommender import Recommender

    from .cli_common import progress_bar

    store, id_of, excluded_all, loaders, empty = _dataset(args)
    protocols = ("sentence", "placeholder") if args.protocol == "both" else (args.protocol,)
    loaded = {p: loaders[p]() for p in protocols}
    if not any(queries for queries, _ in loaded.values()):
        raise _user_error(empty)
    own = {k: v for _, o in loaded.values() for k, v in o.items()}
    rec = Recommender(store, prefetch_mode=args.prefetch, engine=args.engine)
    if args.prefetch in ("dense", "hybrid") and rec.dense is None:
        raise _user_error(
            "no dense index for this store: run `citewise index --embed` with a model installed"
        )
    stage = _second_stage(args, rec)
    if args.candidates is None:  # no second stage: nothing is handed on
        args.candidates = 200
    mode = rec.mode()
    prefetch = _prefetch_fn(args, rec, excluded_all, own)
    if args.plot:
        from .cli_eval_plot import run_plot

        return run_plot(args, rec, stage, prefetch, loaded, id_of)
    latencies: list[float] = []

    def rank(q: ev.EvalQuery) -> list[str]:
        t = time.perf_counter()
        cands = prefetch(q, max(args.candidates, 1000))
        if stage is not None:
            head = cands[: args.candidates]
            papers = store.get_many([c.paper_id for c in head])
            cands = stage.rerank(q.query, head, papers) + cands[args.candidates :]
        latencies.append(time.perf_counter() - t)
        return [id_of[c.paper_id] for c in cands]

    runs = {}
    for protocol, (queries, _own) in loaded.items():
        queries = queries[: args.limit] if args.limit else queries
        bar = progress_bar(len(queries), f"eval {mode} ({protocol})", " queries", args.quiet)
        runs[protocol] = ep.run_protocol(rank, queries, bar.update)
        bar.close()
    _report(args, f"{mode}{f' + rerank@{args.candidates}' if stage else ''}", runs, latencies)
    return 0


def _prefetch_fn(args: argparse.Namespace, rec, excluded_all: set[int], own: dict[str, int]):
    """``(query, depth) -> candidates``: the eval's prefetch, shared by the metrics run and the
    ``--plot`` curve so both rank exactly the same lists."""
    mode = rec.mode()

    def prefetcher(excluded: set[int]):
        made = rec.prefetcher(excluded)
        if args.rest_weight is not None:
            made.settings.rest_weight = args.rest_weight
        return made

    shared = prefetcher(excluded_all)

    def prefetch(q, depth: int) -> list:
        # The citing paper itself is never a candidate (ACL: per query; ACM-CR: the blacklist).
        pf = prefetcher(excluded_all | {own[q.citing_doi]}) if q.citing_doi in own else shared
        return pf.candidates(q.query, depth, mode)

    return prefetch


def _report(args: argparse.Namespace, name: str, runs: dict, latencies: list[float]) -> None:
    """Print the table (and the shared-list count); write the JSON: the first protocol's metrics
    under the usual keys, every row under ``rows``."""
    from citewise.evaluation import placeholders as ep
    from citewise.evaluation import protocol as ev

    rows, extra = ep.report_rows(name, runs)
    print(ev.format_table(rows))
    latencies.sort()
    counts = ", ".join(f"{len(r.queries)} {p} queries" for p, r in runs.items())
    print(f"{counts}; median {1000 * latencies[len(latencies) // 2]:.1f} ms per query")
    lists = extra.get("placeholder_lists")
    if lists:
        print(
            f"{lists['sentences']} sentences with 2+ marker groups: {lists['identical_top10']} "
            f"({lists['fraction']:.3f}) gave all their placeholders the same top 10"
        )
    if args.json:
        first = next(iter(rows.values()))
        out = {k: first[k] for k in ev.METRIC_KEYS} | {"rows": rows, **extra}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


def _int_list(text: str) -> tuple[int, ...]:
    """``"0,5,10"`` -> (0, 5, 10), sorted and unique (argparse reports a ValueError as bad input)."""
    values = sorted({int(x) for x in text.split(",") if x.strip()})
    if not values or values[0] < 0:
        raise ValueError(text)
    return tuple(values)


def _add_rerank_arguments(p) -> None:
    """The second stage's options: on/off, which model, how many candidates, how long, how fused."""
    p.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument(
        "--candidates",
        type=int,
        default=None,
        help="candidates the reranker reorders (default: the model manifest's, as the editor does)",
    )
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
    add_prefetch_argument(p)
    _add_rerank_arguments(p)
    p.add_argument(
        "--protocol",
        choices=("sentence", "placeholder", "both"),
        default="sentence",
        help="one query per citing sentence (the collection's protocol), one per citation marker "
        "(placeholder at the marker, relevant = its references), or both side by side",
    )
    p.add_argument(
        "--rest-weight",
        type=float,
        help="weight of the words outside a placeholder's own segment when its sentence has other "
        "citations (default: the recommender's, models/focus.py; 1 = the whole sentence alike, "
        "as before issue 16)",
    )
    p.add_argument("--limit", type=int, help="evaluate only the first N queries (quick checks)")
    p.add_argument("--json", metavar="FILE", help="write the metrics as JSON")
    p.add_argument(
        "--plot",
        metavar="FILE",
        help="draw R@10 and MRR against the number of reranked candidates (paper 004, Table 4) as a "
        "PNG (needs a reranker and matplotlib, the train extra); the points go to FILE's .json",
    )
    p.add_argument(
        "--plot-candidates",
        type=_int_list,
        default=(0, 5, 10, 20, 30, 50),
        metavar="N,N,...",
        help="numbers of reranked candidates for --plot (0 = prefetch only; default 0,5,10,20,30,50)",
    )
    p.add_argument("-q", "--quiet", action="store_true")
    add_engine_argument(p)
    p.set_defaults(func=cmd_eval)
