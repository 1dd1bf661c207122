"""``citewise eval``: the offline evaluation collections (ACM-CR dev, ACL dev citances).

Kept apart from ``cli.py`` so the evaluation protocols can grow (a second collection, the reranker)
without touching the main command file; registered through ``cli._extra_registrations``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from .cli_common import add_prefetch_argument
from .cli_engine import add_engine_argument
from .settings import default_store_path


def _user_error(message: str) -> Exception:
    # The main module's class, so ``cli.main`` prints it as one line (imported late: cli imports us).
    from .cli_common import UserError

    return UserError(message)


def _second_stage(args: argparse.Namespace, rec):
    """``--reranker DIR`` evaluates any exported reranker folder; otherwise the shipped default
    for the store's prefetch mode (if any; each query then gets its own, :func:`_ranker`)."""
    if not args.rerank:
        return None
    if not hasattr(args, "candidates_given"):  # what the user asked for, before a default fills it
        args.candidates_given = args.candidates
    stage = rec.second_stage
    if args.reranker:
        from citewise.models.reranker import CrossEncoderReranker

        if not (Path(args.reranker) / "manifest.json").exists():
            raise _user_error(f"--reranker {args.reranker}: no manifest.json (export a checkpoint first)")
        stage = CrossEncoderReranker(args.reranker)
    settings = getattr(stage, "settings", None)
    if settings is not None and hasattr(settings, "max_candidates") and args.candidates is None:
        # Without --candidates the eval reranks what the editor reranks (the model manifest's
        # number): the figures are the default pipeline's.
        args.candidates = settings.max_candidates
    return _configured(args, stage)


def _configured(args: argparse.Namespace, stage):
    """``stage`` with the eval's options: ``--candidates`` (when given), ``--budget``,
    ``--prefetch-weight``."""
    settings = getattr(stage, "settings", None)
    if settings is not None and hasattr(settings, "max_candidates"):
        given = getattr(args, "candidates_given", None)
        if given is not None:
            settings.max_candidates = given
        settings.budget_s = args.budget
        if args.prefetch_weight is not None:
            settings.prefetch_weight = args.prefetch_weight
    return stage


def _head(args: argparse.Namespace, stage) -> int:
    """How many of a query's candidates ``stage`` reorders: its own number, as in the editor."""
    return int(getattr(getattr(stage, "settings", None), "max_candidates", 0) or args.candidates)


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
    from citewise.evaluation import library as lib
    from citewise.evaluation import placeholders as ep
    from citewise.evaluation import protocol as ev

    def first(queries: list) -> list:  # the library protocol's --limit: its libraries' queries
        return queries[: args.limit] if args.limit else queries

    if args.dataset == "acm-cr":
        _check_paths(args, ("papers", "collection", "blacklist"))
        store = _open_eval_store(args, "acm-cr.sqlite")
        coll = ev.acmcr_collection(store, ev.load_blacklist(args.blacklist))
        loaders: dict[str, Callable[[], tuple[list, dict]]] = {
            "sentence": lambda: (ev.load_dev_queries(args.papers, coll.dois), {}),
            "placeholder": lambda: (ep.load_dev_queries(args.papers, coll.dois), {}),
            "library": lambda: (
                lib.acmcr_libraries(
                    args.papers,
                    store,
                    coll,
                    first(ev.load_dev_queries(args.papers, coll.dois)),
                    args.library_size,
                    args.seed,
                ),
                {},
            ),
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

        def acl_library() -> tuple[list, dict]:
            queries, citing = ev.load_acl_dev_queries(args.citances, store)
            return lib.acl_libraries(store, first(queries), citing, args.library_size, args.seed), {}

        loaders = {
            "sentence": lambda: ev.load_acl_dev_queries(args.citances, store),
            "placeholder": lambda: ep.acl_placeholder_queries(args.citances, store),
            "library": acl_library,
        }
        empty = f"{args.citances}: no dev-split sentence cites a paper of the store"
        return store, ev.acl_ids(store), set(), loaders, empty
    raise _user_error(f"unknown dataset {args.dataset!r}")


def cmd_eval(args: argparse.Namespace) -> int:
    """Both collections share one ranking loop: prefetch, then the second stage on the head; each
    protocol (sentence, per placeholder) runs it over its own queries."""
    from citewise.evaluation import placeholders as ep
    from citewise.models.prefetch_choice import choose_prefetch
    from citewise.models.recommender import Recommender

    from .cli_common import progress_bar

    if args.dataset == "check":
        return cmd_eval_check(args)
    if args.dataset == "compare":
        return cmd_eval_compare(args)
    if args.runs:
        raise _user_error(
            f"eval {args.dataset}: unexpected {' '.join(args.runs)} (two JSON files are for `eval compare`)"
        )
    store, id_of, excluded_all, loaders, empty = _dataset(args)
    if args.protocol == "library":
        return _eval_library(args, store, loaders["library"], empty)
    protocols = ("sentence", "placeholder") if args.protocol == "both" else (args.protocol,)
    loaded = {p: loaders[p]() for p in protocols}
    if not any(queries for queries, _ in loaded.values()):
        raise _user_error(empty)
    own = {k: v for _, o in loaded.values() for k, v in o.items()}
    rec = Recommender(store, prefetch_mode=args.prefetch, engine=args.engine)
    _with_citing_vectors(rec, args.quiet)
    choose_prefetch(args.prefetch, rec, str(store.path)).required()
    stage = _second_stage(args, rec)
    if args.candidates is None:  # no second stage: nothing is handed on
        args.candidates = 200
    mode = rec.mode()
    prefetch = _prefetch_fn(args, rec, excluded_all, own)
    if args.plot:
        from .cli_eval_plot import run_plot

        return run_plot(args, rec, stage, prefetch, loaded, id_of)
    latencies: list[float] = []
    used: Counter[str] = Counter()
    rank = _ranker(args, rec, stage, prefetch, id_of, latencies, used)
    recorder = _bib_lift_recorder(args)
    runs = {}
    for protocol, (queries, _own) in loaded.items():
        queries = queries[: args.limit] if args.limit else queries
        bar = progress_bar(len(queries), f"eval {mode} ({protocol})", " queries", args.quiet)
        runs[protocol] = ep.run_protocol(
            recorder.wrap(rank, protocol) if recorder else rank, queries, bar.update
        )
        bar.close()
    _report(args, f"{mode}{_used_label(used, stage, args.candidates)}", runs, latencies)
    if recorder is not None:
        _report_bib_lift(args, recorder, _world_bibs(args, loaded, id_of, excluded_all))
    return 0


def _bib_lift_recorder(args: argparse.Namespace):
    """``--bib-lift FILE``: a recorder of every ranked list (evaluation/bib_lift.py), else None."""
    from citewise.evaluation import bib_lift

    return bib_lift.Recorder() if args.bib_lift else None


def _world_bibs(args: argparse.Namespace, loaded: dict, id_of: dict[int, str], excluded: set[int]) -> dict:
    """Each citing paper's draft ``.bib`` beside a whole store: ACM-CR, its references that the
    collection holds; ACL, the papers its dev sentences cite (all the split labels)."""
    from citewise.evaluation import bib_lift

    if args.dataset == "acm-cr":
        collection = {doi for pid, doi in id_of.items() if doi and pid not in excluded}
        return bib_lift.acmcr_bibs(args.papers, collection)
    return bib_lift.bibs_of_queries(q for queries, _own in loaded.values() for q in queries)


def _report_bib_lift(args: argparse.Namespace, recorder, bibs: dict) -> None:
    """Print the lift rules' tables and write the recorded lists to ``--bib-lift FILE``."""
    from citewise.evaluation import bib_lift

    lists = recorder.with_bibs(bibs)
    bib_lift.save(args.bib_lift, lists)
    print("\n" + bib_lift.report(lists))
    print(f"(lists written to {args.bib_lift}: `python -m citewise.evaluation.bib_lift {args.bib_lift}`)")


def _with_citing_vectors(rec, quiet: bool) -> None:
    """Where the store knows how its papers are cited but its citing texts are not embedded (a
    store made before they were, or by a script), embed them as ``citewise index`` would, so the
    figures are those of the pipeline a user's index serves (``models/citing_vectors.py``)."""
    from citewise.models import citing_vectors
    from citewise.models.citation_prior import knows_citations

    if rec.citing is not None or not rec.engine.is_local or not knows_citations(rec.bm25):
        return
    if not quiet:
        print("embedding the store's citing texts (as `citewise index` does) ...", file=sys.stderr)
    if citing_vectors.build_for(rec.store, knows=True) is not None:
        rec.reload_citing()


def _stage_label(stage, candidates: int | None) -> str:
    """How a row names its second stage: ``+ rerank@N`` for a cross-encoder, ``+ teacher@N`` for
    the bi-encoder re-scoring a student's fused head (models/teacher_rescore.py), '' for none."""
    if stage is None:
        return ""
    return f" + {'teacher' if getattr(stage, 'name', '') == 'teacher-rescore' else 'rerank'}@{candidates}"


def _used_label(used: Counter[str], stage, candidates: int | None) -> str:
    """The row's second stage: the one every query used, or each with its number of queries where
    the prefetch chose per query (a store whose ``cited-as`` list steps aside for some)."""
    if len(used) <= 1:
        return next(iter(used), _stage_label(stage, candidates))
    return " + " + " / ".join(f"{label.removeprefix(' + ')} ({n})" for label, n in used.most_common())


def _ranker(
    args: argparse.Namespace,
    rec,
    stage,
    prefetch,
    id_of: dict[int, str],
    latencies: list[float],
    used: Counter[str] | None = None,
):
    """``query -> ranked paper ids``: the prefetch, then the second stage on its head (timed),
    reading how the store's papers cite each candidate as the server does (``Recommender.rerank``).
    The stage is the query's own (``Recommender.stage_for`` its candidates, as the server chooses)
    unless ``--reranker`` names one or ``--no-rerank`` turns it off; ``used`` counts each."""
    fixed = bool(args.reranker) or not args.rerank

    def rank(q) -> list[str]:
        t = time.perf_counter()
        cands = prefetch(q, max(args.candidates, 1000))
        own = stage if fixed else _configured(args, rec.stage_for(cands))
        if own is not None:
            n = _head(args, own)
            head = cands[:n]
            papers = rec.store.get_many([c.paper_id for c in head])
            cands = rec.rerank(q.query, head, papers, own) + cands[n:]
            if used is not None:
                used[_stage_label(own, n)] += 1
        latencies.append(time.perf_counter() - t)
        return [id_of[c.paper_id] for c in cands]

    return rank


def _eval_library(args: argparse.Namespace, store, load, empty: str) -> int:
    """``--protocol library`` (issue 26): each citing paper's sentences ranked against its own
    small library store (evaluation/library.py), through the same prefetch and second stage."""
    from citewise.evaluation import library as lib
    from citewise.models.prefetch_choice import choose_prefetch
    from citewise.models.recommender import Recommender

    from .cli_common import progress_bar

    if args.engine != "local" or args.plot:
        raise _user_error("--protocol library ranks local library stores: no --engine, no --plot")
    cases, _ = load()
    if not cases:
        raise _user_error(empty)
    latencies: list[float] = []
    used: Counter[str] = Counter()
    held: dict = {}
    id_field = "doi" if args.dataset == "acm-cr" else "acl_id"

    def make_rank(small):
        rec = Recommender(small, prefetch_mode=args.prefetch)
        choose_prefetch(args.prefetch, rec, str(small.path)).required()
        if "stage" not in held:  # one second stage for every library (the shipped one is shared)
            held["stage"] = _second_stage(args, rec)
            if args.candidates is None:
                args.candidates = 200
        held["mode"] = rec.mode()
        prefetch = _prefetch_fn(args, rec, set(), {})
        rank = _ranker(args, rec, held["stage"], prefetch, lib.store_ids(small, id_field), latencies, used)
        return recorder.wrap(rank, "library") if recorder else rank

    recorder = _bib_lift_recorder(args)
    n = sum(len(c.queries) for c in cases)
    bar = progress_bar(n, "eval library", " queries", args.quiet)
    run = lib.run_libraries(cases, store, make_rank, args.prefetch, bar.update)
    bar.close()
    stage = _used_label(used, held.get("stage"), args.candidates)
    _report_library(args, f"{held.get('mode', args.prefetch)}{stage}, library", run, latencies)
    if recorder is not None:  # the draft's .bib: the library's cited papers
        ids = lib.store_ids(store, id_field)
        _report_bib_lift(args, recorder, {c.citing: {ids[pid] for pid in c.cited} for c in cases})
    return 0


def _report_library(args: argparse.Namespace, name: str, run, latencies: list[float]) -> None:
    """The library protocol's one row (R@1, R@5, R@10, MRR, nDCG@10), the libraries' sizes, and the
    JSON: the metrics under their keys, the row under ``rows``, the sizes under ``libraries``."""
    from citewise.evaluation import protocol as ev

    rows = {name: run.metrics()}
    print(ev.format_table(rows, ev.LIBRARY_KEYS))
    sizes, cited, latencies = sorted(run.sizes), sorted(run.cited), sorted(latencies)
    libraries = {
        "papers": len(sizes),
        "size_median": sizes[len(sizes) // 2],
        "size_min": sizes[0],
        "size_max": sizes[-1],
        "cited_median": cited[len(cited) // 2],
        "library_size": args.library_size,
        "seed": args.seed,
    }
    median_ms = 1000 * latencies[len(latencies) // 2] if latencies else 0.0
    print(
        f"{len(run.per_query)} queries of {len(sizes)} citing papers; libraries of {sizes[0]}-{sizes[-1]} "
        f"papers (median {libraries['size_median']}, {libraries['cited_median']} cited); "
        f"median {median_ms:.1f} ms per query"
    )
    if args.json:
        out = dict(rows[name]) | {"rows": rows, "libraries": libraries, "median_ms": round(median_ms, 2)}
        out["per_query"] = {name: run.per_query}  # for `citewise eval compare`
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


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
        # Each query's figures, for `citewise eval compare` (a paired test of two runs).
        out["per_query"] = {f"{name}, {p}": r.per_query for p, r in runs.items()}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


# -- eval compare: two runs, query by query ------------------------------------------------------


def _per_query(path: str) -> dict[str, dict[str, dict[str, float]]]:
    """A ``--json`` file's per-query figures (row name -> query id -> metrics), or a user error."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise _user_error(f"eval compare: cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise _user_error(
            f"eval compare: {path} is not JSON ({exc}); give two files written by --json"
        ) from exc
    rows = data.get("per_query") if isinstance(data, dict) else None
    if not isinstance(rows, dict) or not rows:
        raise _user_error(
            f"eval compare: {path} has no per-query figures (written by `citewise eval --json` before "
            "they were kept, or by `eval check`); rerun that eval with --json FILE"
        )
    return rows


def _row_pairs(a: list[str], b: list[str]) -> list[tuple[str, str]]:
    """Which row of B goes with which row of A: by what the row measured (the name after the
    pipeline: ``sentence``, ``placeholder, 2+ marker groups``...) when every row of the smaller
    run finds its match, so a ``--protocol both`` run compares with a ``placeholder`` one; else in
    order."""

    def kind(name: str) -> str:
        return name.split(", ", 1)[1] if ", " in name else name

    b_by_kind = {kind(n): n for n in b}
    by_kind = [(n, b_by_kind[kind(n)]) for n in a if kind(n) in b_by_kind]
    unique = len(b_by_kind) == len(b) and len({kind(n) for n in a}) == len(a)
    if unique and len(by_kind) == min(len(a), len(b)):
        return by_kind
    return list(zip(a, b, strict=False))


def cmd_eval_compare(args: argparse.Namespace) -> int:
    """``citewise eval compare A.json B.json``: each row of B against the row of A that measured
    the same (:func:`_row_pairs`), every metric tested query by query (evaluation/paired.py)."""
    from citewise.evaluation import paired

    if len(args.runs) != 2:
        raise _user_error("eval compare: give two --json files of `citewise eval` (A, the baseline, then B)")
    if args.rounds < 100:
        raise _user_error(f"eval compare: --rounds {args.rounds} is too few for a p-value (give 100 or more)")
    a_rows, b_rows = _per_query(args.runs[0]), _per_query(args.runs[1])
    pairs = _row_pairs(list(a_rows), list(b_rows))
    if len(pairs) < max(len(a_rows), len(b_rows)):
        print(f"(A has {len(a_rows)} rows, B {len(b_rows)}: {len(pairs)} compared)")
    report = []
    for a_name, b_name in pairs:
        a, b = a_rows[a_name], b_rows[b_name]
        first = next(iter(a.values()), {})
        metrics = [k for k in first if k in next(iter(b.values()), {})]
        try:
            results = paired.compare_rows(a, b, metrics, args.rounds, args.seed)
        except ValueError as exc:
            raise _user_error(
                f"eval compare: {a_name!r} and {b_name!r}: {exc} (runs of different query sets?)"
            ) from None
        print(f"A: {a_name} ({args.runs[0]})\nB: {b_name} ({args.runs[1]})")
        print(paired.format_results(results))
        shared = results[0].queries if results else 0
        if shared < max(len(a), len(b)):
            print(f"(paired over the {shared} queries both ran; A ran {len(a)}, B {len(b)})")
        report.append({"a": a_name, "b": b_name, "results": [r.__dict__ for r in results]})
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


# -- eval check (issue 27) -----------------------------------------------------------------------


def _check_dataset(args: argparse.Namespace):
    """``(store, citing sentences, collection ids)`` of ``eval check --dataset``."""
    from citewise.evaluation import check_eval as ce
    from citewise.evaluation import protocol as ev

    if args.check_dataset == "acm-cr":
        _check_paths(args, ("papers", "collection", "blacklist"))
        store = _open_eval_store(args, "acm-cr.sqlite")
        coll = ev.acmcr_collection(store, ev.load_blacklist(args.blacklist))
        pid_of = {d: pid for pid, d in coll.doi_of.items() if d and pid not in coll.excluded}
        queries = ev.load_dev_queries(args.papers, coll.dois)
        queries = queries[: args.limit] if args.limit else queries
        sentences = [
            ce.CitingSentence(q.qid, q.query, tuple(sorted(pid_of[d] for d in q.relevant))) for q in queries
        ]
        return store, sentences, sorted(pid_of.values())
    if args.check_dataset == "acl":
        _check_paths(args, ("citances",))
        if args.store is None and not args.collection:
            raise _user_error("eval check --dataset acl needs --store (or --collection to build one)")
        store = _open_eval_store(args, "acl.sqlite")
        queries, citing = ev.load_acl_dev_queries(args.citances, store)
        queries = queries[: args.limit] if args.limit else queries
        pid_of = {a: pid for pid, a in ev.acl_ids(store).items() if a}
        sentences = [
            ce.CitingSentence(
                q.qid, q.query, tuple(sorted(pid_of[a] for a in q.relevant)), citing.get(q.citing_doi)
            )
            for q in queries
        ]
        return store, sentences, sorted(pid_of.values())
    raise _user_error("eval check needs --dataset acm-cr or --dataset acl")


def _unmodified_entries(args: argparse.Namespace, store, sentences, collection: list[int]):
    """``(group, entry text)`` of the real entries checked for false flags: the cited papers' and a
    seeded sample of others. ACM-CR: the acm-dl ``.bib`` files' own text (every paper the dev
    papers of the run cite); ACL: ``format_entry`` of the stored papers."""
    import random

    from citewise.evaluation import check_eval as ce
    from citewise.evaluation import protocol as ev
    from citewise.indexer.bibtex_writer import format_entry

    rng = random.Random(args.seed + 2)
    cited_ids = sorted({pid for s in sentences for pid in s.cited})
    if args.check_dataset == "acm-cr":
        citing = {s.qid.split("#", 1)[0] for s in sentences}
        cited: set[str] = set()
        for path in sorted(Path(args.papers).rglob("*.xml")):
            paper = ev.read_citing_paper(path)
            if paper.doi in citing:
                cited |= {d for d in paper.refs.values() if d}
        root = Path(args.collection)
        bibs = [root] if root.is_file() else list(root.rglob("*.bib"))
        entries = ce.read_bib_entries(bibs)
        out = [("cited", text) for _src, doi, text in entries if doi in cited]
        # Session records ("Session details: ...") are no papers: the importer skips them too.
        sample = ce.sample_others(rng, entries, args.sample, lambda e: e[1] in cited or ce.is_session(e[2]))
        return out + [("sample", text) for _src, _doi, text in sample]
    others = ce.sample_others(rng, collection, args.sample, set(cited_ids).__contains__)
    papers = store.get_many(cited_ids + others)
    group = dict.fromkeys(cited_ids, "cited") | dict.fromkeys(others, "sample")
    return [(group[pid], format_entry(papers[pid], f"ref{pid}")) for pid in group if pid in papers]


def _check_fabricated(args: argparse.Namespace, store, sentences, collection: list[int], evidence):
    import random

    from citewise.evaluation import check_eval as ce

    rng = random.Random(args.seed + 1)
    cited = store.get_many(sorted({pid for s in sentences for pid in s.cited}))
    fabricated, tried = ce.fabricate_all(cited, lambda: store.get(rng.choice(collection)), args.seed)
    rows = ce.score_fabricated(fabricated, evidence)
    return ce.summarise_fabricated(rows, tried), rows


def cmd_eval_check(args: argparse.Namespace) -> int:
    """``citewise eval check``: unlikely-citation swaps, fabricated entries, false flags."""
    import os

    from citewise.evaluation import check_eval as ce
    from citewise.models.checks.evidence import StoreEvidence
    from citewise.models.checks.fit import CitationFit
    from citewise.models.recommender import Recommender

    from .cli_common import progress_bar

    t0, load_start = time.perf_counter(), [round(x, 2) for x in os.getloadavg()]
    store, sentences, collection = _check_dataset(args)
    if not sentences:
        raise _user_error("eval check: no dev sentence cites a paper of the store")
    rec = Recommender(store, build_missing=False, use_dense=False)
    if rec.bm25 is None:
        raise _user_error(f"{store.path}: no BM25 index (run `citewise index --store {store.path}`)")
    bar = progress_bar(len(sentences), "eval check (swaps)", " sentences", args.quiet)
    trials = ce.citation_trials(
        sentences,
        CitationFit(rec.bm25),
        rec.bm25,
        ce.pools_from_store(store, collection),
        args.seed,
        bar.update,
    )
    bar.close()
    evidence = StoreEvidence(store)
    fabricated, _rows = _check_fabricated(args, store, sentences, collection, evidence)
    unmodified = ce.check_unmodified(_unmodified_entries(args, store, sentences, collection), evidence)
    report = {
        "dataset": args.check_dataset,
        "store": str(store.path),
        "seed": args.seed,
        "sentences": len(sentences),
        "unlikely_citation": ce.summarise_trials(trials),
        "suspect_reference": fabricated,
        "unmodified": unmodified,
        "seconds": round(time.perf_counter() - t0, 1),
        "load_average": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
    }
    _print_check_report(report)
    if args.json:
        text = json.dumps(report, indent=1, ensure_ascii=False) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            Path(args.json).write_text(text, encoding="utf-8")
    if args.plot:
        from .cli_eval_plot import draw_check_curve

        draw_check_curve(report, args.plot)
    return 0


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _print_check_report(r: dict) -> None:
    """The three tables of ``eval check`` (markdown), and the false-flag examples."""
    u = r["unlikely_citation"]
    n_true = u["trials"]["true"]
    print(f"## unlikely-citation: {n_true} true citations of {r['sentences']} sentences ({r['dataset']})\n")
    at = u["at_shipped_threshold"]
    head = f"| swap | trials | not judged | at THRESHOLD {u['shipped_threshold']} (FA {_pct(at['false_alarms'])})"
    rates = u["at_rates"]
    print(head + "".join(f" | at FA {_pct(p['rate'])}" for p in rates) + " |")
    print("|---|---|---|---|" + "---|" * len(rates))
    print(
        f"| true (false alarms) | {n_true} | {u['not_judged']['true']} | {_pct(at['false_alarms'])}"
        + "".join(f" | {_pct(p['false_alarms'])}" for p in rates)
        + " |"
    )
    for kind in ("random", "venue", "bm25"):
        print(
            f"| {kind} | {u['trials'][kind]} | {u['not_judged'][kind]} | {_pct(at['detection'][kind])}"
            + "".join(f" | {_pct(p['detection'][kind])}" for p in rates)
            + " |"
        )
    print("thresholds at FA " + ", ".join(f"{_pct(p['rate'])}: {p['threshold']}" for p in rates) + "\n")
    print("## suspect-reference: fabricated entries of the cited papers\n")
    print("| fabrication | entries | suspect | any finding | tied | suspect of tied | any of tied |")
    print("|---|---|---|---|---|---|---|")
    for kind, row in r["suspect_reference"].items():
        if kind != "not_made":
            print(
                f"| {kind} | {row['entries']} | {_pct(row['suspect'])} | {_pct(row['any'])} | {row['tied']} | "
                f"{_pct(row['suspect_of_tied'])} | {_pct(row['any_of_tied'])} |"
            )
    m = r["unmodified"]
    print(f"\n## unmodified entries: {m['entries']} ({m['unreadable']} unreadable)\n")
    print("findings: " + ", ".join(f"{c} {n}" for c, n in m["findings"].items()))
    print("entries flagged: " + (", ".join(f"{g} {n}" for g, n in m["flagged_entries"].items()) or "none"))
    for cause, n in m["causes"].items():
        print(f"- {n} x {cause}, e.g. {m['examples'][cause][0]['message']}")
    print(f"\n{r['seconds']} s, load average {r['load_average']['start']} -> {r['load_average']['end']}")


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
        help="candidates the second stage reorders (default: the model manifest's, as the editor does)",
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


def _add_protocol_arguments(p) -> None:
    """What a query is (``--protocol``), and the library protocol's size."""
    p.add_argument(
        "--protocol",
        choices=("sentence", "placeholder", "both", "library"),
        default="sentence",
        help="one query per citing sentence (the collection's protocol), one per citation marker "
        "(placeholder at the marker, relevant = its references), or both side by side; library: "
        "each citing paper's sentences ranked against its own small library store (its cited "
        "papers + --library-size seeded papers of the same field; R@1, R@5, R@10, MRR)",
    )
    p.add_argument(
        "--library-size",
        type=int,
        default=300,
        help="--protocol library: same-field papers beside the cited ones (default 300)",
    )
    p.add_argument(
        "--bib-lift",
        metavar="FILE",
        help="also score the rules lifting the draft's .bib papers (models/bib_lift.py) over each "
        "query's list, the .bib being the citing paper's references in the store (--protocol "
        "library: its library's cited papers); the lists go to FILE "
        "(`python -m citewise.evaluation.bib_lift FILE` scores them again)",
    )


def _add_compare_arguments(p) -> None:
    """``eval compare``'s own: the two runs, and how many random rounds test them (--seed, --json shared)."""
    p.add_argument(
        "runs", nargs="*", metavar="RUN.json", help="eval compare: the baseline's and the other run's --json"
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=10000,
        help="eval compare: random sign flips and bootstrap draws (default 10000)",
    )


def _add_check_arguments(p) -> None:
    """``eval check``'s own options (--limit, --json, --plot and --store are shared)."""
    p.add_argument(
        "--dataset",
        dest="check_dataset",
        choices=("acm-cr", "acl"),
        help="eval check: ACM-CR dev (--papers, --collection, --blacklist) or the ACL dev split "
        "(--citances, over a store of the Anthology XML)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="eval check: seed of the swaps, fabrications and sample; --protocol library: of the libraries; "
        "eval compare: of the sign flips and bootstrap draws",
    )
    p.add_argument(
        "--sample",
        type=int,
        default=3000,
        help="eval check: real entries beside the cited ones checked for false flags (default 3000)",
    )


def register(subparsers) -> None:
    """Add ``eval`` to the main parser's subcommands."""
    p = subparsers.add_parser("eval", help="evaluate on ACM-CR dev or the ACL dev split (R@K, MRR, nDCG@10)")
    p.add_argument(
        "dataset",
        choices=("acm-cr", "acl-citances", "check", "compare"),
        help="a collection to rank; `check`: the reference checks of issue 27 on --dataset's dev set; "
        "`compare A.json B.json`: two runs' --json files, query by query (paired randomization test)",
    )
    _add_compare_arguments(p)
    _add_check_arguments(p)
    p.add_argument("--papers", help="acm-cr: folder of citing-paper XML files (searched recursively)")
    p.add_argument(
        "--citances", help="acl-citances: scisummnet-citances.jsonl (its 2013/2014 citing papers are used)"
    )
    p.add_argument("--collection", help="folder of the collection (ACM-CR BibTeX, or the ACL Anthology XML)")
    p.add_argument("--blacklist", help="DOIs of the query papers, removed from the collection")
    p.add_argument("--store", help="store holding the collection (built from --collection when empty)")
    add_prefetch_argument(p)
    _add_rerank_arguments(p)
    _add_protocol_arguments(p)
    p.add_argument(
        "--rest-weight",
        type=float,
        help="weight of the words outside a placeholder's own segment when its sentence has other "
        "citations (default: the recommender's, models/focus.py; 1 = the whole sentence alike, "
        "as before issue 16)",
    )
    p.add_argument("--limit", type=int, help="evaluate only the first N queries (quick checks)")
    p.add_argument("--json", metavar="FILE", help="write the metrics as JSON (eval check: - = stdout)")
    p.add_argument(
        "--plot",
        metavar="FILE",
        help="draw R@10 and MRR against the number of reranked candidates (paper 004, Table 4) as a "
        "PNG (needs a reranker and matplotlib, the train extra); the points go to FILE's .json. "
        "eval check: the detection against false-alarm curve (.svg or .png)",
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
