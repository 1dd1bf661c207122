"""``citewise fetch``: fill the store from the open scholarly APIs (Semantic Scholar's Graph API,
OpenAlex, Crossref), then work offline: around a library (``--around``) or a slice of the
literature (``--query``, ``--field``, ``--venue``; ``cli_fetch_slice.py``).

Why a module of its own: it is the only command that talks to the network, with its own failure
modes (no network, a proxy, a refused key, an API answering HTML) and its own options (keys,
base URLs, the cache). The work itself is in ``indexer/fetch/``; this module reads options, shows
progress, turns failures into one line, and brings the search index up to date as
``citewise index`` does (its helpers, reused).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from . import cli_fetch_slice as slices
from .cli_common import UserError, open_store, positive_int, store_path
from .cli_fetch_slice import FROM

DEFAULT_LIMIT = 500  # references and citing papers kept of each paper
URL_OPTIONS = (
    ("--s2-url", "CITEWISE_S2_URL", "Semantic Scholar Graph API"),
    ("--openalex-url", "CITEWISE_OPENALEX_URL", "OpenAlex API"),
    ("--crossref-url", "CITEWISE_CROSSREF_URL", "Crossref API"),
    ("--arxiv-url", "CITEWISE_ARXIV_URL", "arXiv API"),
)


def register(sub: argparse._SubParsersAction, store_help: str) -> None:
    """The ``fetch`` subcommand's arguments."""
    p = sub.add_parser(
        "fetch",
        help="fill the store from Semantic Scholar, OpenAlex and Crossref around your library (--around) or "
        "a slice (--query, --field, --venue, --years): papers, abstracts, and how each paper is cited",
    )
    _what_options(p)
    p.add_argument("--hops", type=int, choices=(1, 2), default=1, help="with --around: 1 (default) or 2")
    p.add_argument(
        "--limit",
        type=positive_int,
        default=DEFAULT_LIMIT,
        help=f"--around: references and citing papers of each paper; a slice: papers from each API "
        f"(default {DEFAULT_LIMIT})",
    )
    p.add_argument(
        "--estimate", action="store_true", help="ask the APIs' counts, print papers, requests and time"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the first requests it would send; send nothing"
    )
    p.add_argument(
        "--retry-missing",
        action="store_true",
        help="with --around: ask again for library papers an earlier run did not find (by default once)",
    )
    p.add_argument("--store", help=store_help)
    p.add_argument("--s2-key", metavar="KEY", help="Semantic Scholar API key (default: $CITEWISE_S2_KEY)")
    p.add_argument(
        "--mailto",
        metavar="EMAIL",
        help="your address for the OpenAlex and Crossref polite pools (default: $CITEWISE_MAILTO)",
    )
    p.add_argument(
        "--cache-days",
        type=float,
        default=30.0,
        metavar="DAYS",
        help="reuse kept API answers younger than this (default 30; 0: ask again)",
    )
    for option, env, name in URL_OPTIONS:
        p.add_argument(option, metavar="URL", help=f"base URL of the {name} (default: ${env})")
    p.add_argument("--no-search-index", action="store_true", help="skip (re)building the BM25 index")
    p.add_argument(
        "--embed", action=argparse.BooleanOptionalAction, default=None, help="as for `citewise index`"
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress")
    p.set_defaults(func=cmd_fetch)


def _what_options(p: argparse.ArgumentParser) -> None:
    """What to fetch: around a library, or a slice (words, a field, a venue, years, which APIs)."""
    p.add_argument(
        "--around",
        metavar="LIBRARY",
        help="a .bib, a zotero.sqlite or a citewise store: its papers, "
        "the papers they cite and the papers citing them",
    )
    p.add_argument("--query", metavar="WORDS", help="papers with these words in title or abstract")
    p.add_argument(
        "--field",
        metavar="NAME",
        help="OpenAlex works of a field, subfield or topic, by name (resolved first; an ambiguous name "
        "lists the candidates) or id (fields/17, subfields/1702, T10181)",
    )
    p.add_argument(
        "--venue",
        metavar="NAME",
        help="OpenAlex works of a journal or proceedings, by name (resolved first) or source id (S137773608)",
    )
    p.add_argument(
        "--from",
        dest="source",
        choices=FROM,
        help="--query: OpenAlex, Semantic Scholar's bulk search, or both (default both; --field and "
        "--venue: openalex)",
    )
    p.add_argument(
        "--years", metavar="RANGE", help="with --query/--field/--venue: 2015-2024, 2015-, -2010 or 2019"
    )


# -- building the clients ---------------------------------------------------------------------------
def _apis(args: argparse.Namespace, cache_folder: Path | None) -> tuple[Any, Any]:
    """The S2 and OpenAlex clients of the options (env vars where an option is not given)."""
    from citewise.indexer.fetch.around import clients

    endpoints = _endpoints(args)
    on_wait = None if args.quiet else (lambda m: print(f"citewise: note: {m}", file=sys.stderr))
    return clients(endpoints, cache_folder, on_wait=on_wait)


def _endpoints(args: argparse.Namespace):
    from citewise.indexer.fetch.around import Endpoints

    return Endpoints(
        args.s2_url,
        args.s2_key,
        args.openalex_url,
        args.mailto,
        args.cache_days,
        crossref_url=args.crossref_url,
        arxiv_url=args.arxiv_url,
    )


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc


def _seeds(args: argparse.Namespace) -> list:
    from citewise.indexer.fetch.library import load_seeds
    from citewise.indexer.filter_seeds import LibraryError

    try:
        return load_seeds(args.around)
    except LibraryError as exc:
        raise UserError(str(exc)) from None


# -- the command ------------------------------------------------------------------------------------
def cmd_fetch(args: argparse.Namespace) -> int:
    """``citewise fetch``: resolve, page, store (each page with its state), then index."""
    sl = _slice(args)
    seeds = _seeds(args) if args.around else []
    if args.dry_run:
        return _dry_run(args, seeds, sl)
    if args.estimate:
        return _estimate(args, seeds, sl)
    from citewise.indexer.fetch.around import cache_folder

    if sl is not None:  # names first: a name that resolves to nothing changes nothing
        _resolve(sl, _apis(args, None)[1])
    new = not store_path(args).exists()
    store = open_store(args, create=True, write=True)
    s2, oa = _apis(args, cache_folder(store.path))
    fetcher = _fetcher(store, s2, oa, args)
    generation, t0 = store.generation, time.perf_counter()
    try:
        _run(fetcher, args, seeds, sl)
    except KeyboardInterrupt:
        _forget_if_unused(store, fetcher, new)
        print(f"citewise: interrupted: {_kept(fetcher)}", file=sys.stderr)
        return 130
    except _fetch_error() as exc:
        _forget_if_unused(store, fetcher, new)
        raise UserError(f"{exc}; {_kept(fetcher)}") from None
    except UserError:
        _forget_if_unused(store, fetcher, new)
        raise
    summary = _summary(fetcher, store, time.perf_counter() - t0)
    summary.update(_refresh_indexes(store, args, store.generation != generation))
    if sl is not None:
        summary["slice"] = {"filter": sl.filter, "apis": list(sl.apis), "resolved": sl.chosen}
    _print(summary, args)
    return 0


def _slice(args: argparse.Namespace) -> slices.Slice | None:
    """The slice asked for (None: --around), after checking the options go together."""
    sliced = args.query or args.field or args.venue
    if bool(args.around) == bool(sliced):
        raise UserError(
            "give either --around LIBRARY or a slice (--query WORDS, --field NAME, --venue NAME)"
            if not args.around
            else "--around goes alone: fetch a slice (--query, --field, --venue) in a second run"
        )
    if args.around and (args.years or args.source):
        raise UserError(
            "--years and --from go with a slice (--query, --field, --venue); --around keeps every year"
        )
    if sliced and (args.hops != 1 or args.retry_missing):
        raise UserError("--hops and --retry-missing go with --around; a slice takes --years, --from, --limit")
    return slices.plan(args) if sliced else None


def _resolve(sl: slices.Slice, oa) -> None:
    """The slice's names resolved (and said); no network is one line saying nothing changed."""
    try:
        slices.resolve(sl, oa)
    except _fetch_error() as exc:
        raise UserError(f"{exc}; nothing changed") from None
    slices.say_notes(sl)


def _forget_if_unused(store, fetcher, new: bool) -> None:
    """A store this run created and stored nothing in (no network, Ctrl-C before the first page)
    is removed again: "nothing changed" must hold, and a mistyped --store leaves no file behind."""
    if not new or fetcher.totals.pages:
        return
    import shutil

    from citewise.indexer.fetch.around import cache_folder

    store.close()
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{store.path}{suffix}").unlink(missing_ok=True)
    shutil.rmtree(cache_folder(store.path), ignore_errors=True)  # answers kept for a store that is not


def _fetch_error() -> type[Exception]:
    from citewise.indexer.fetch.http import FetchError

    return FetchError


def _fetcher(store, s2, oa, args: argparse.Namespace):
    from citewise.indexer.fetch.around import arxiv_of, crossref_of
    from citewise.indexer.fetch.plan import Fetcher

    from .progress import Phase

    def phase(label: str, unit: str, total: int | None) -> Phase:
        return Phase(label, unit, total, quiet=args.quiet)

    fetcher = Fetcher(store, s2, oa, limit=args.limit, phase=phase, retry_missing=args.retry_missing)
    fetcher.crossref = crossref_of(_endpoints(args), s2)
    fetcher.arxiv = arxiv_of(_endpoints(args), s2)
    return fetcher


def _run(fetcher, args: argparse.Namespace, seeds: list, sl: slices.Slice | None) -> None:
    from citewise.indexer.fetch.around import around

    if sl is not None:
        slices.run(fetcher, sl)
        return
    refs = around(fetcher, seeds, args.hops)
    if not refs and seeds and not (fetcher.totals.crossref or fetcher.totals.preprints):
        raise UserError(
            f"none of the {len(seeds)} library papers was found on Semantic Scholar "
            f"({fetcher.totals.not_found} unknown, {fetcher.totals.ambiguous} ambiguous titles); nothing fetched"
        )


def _kept(fetcher) -> str:
    from citewise.indexer.fetch.around import kept

    return kept(fetcher)


def _summary(fetcher, store, seconds: float) -> dict:
    from citewise.indexer.fetch.around import summary

    return summary(fetcher, store, seconds)


def _refresh_indexes(store, args: argparse.Namespace, changed: bool) -> dict:
    """The search index (and embeddings where the ranking uses them), as ``citewise index``
    brings them up to date after an import."""
    from .cli_index import _embed_citing, _embed_store, _search_index_step, _should_embed

    out = _search_index_step(store, args, 0, changed)
    if _should_embed(store, args.embed):
        out.update(_embed_store(store, args.quiet))
    if args.embed is not False:
        out.update(_embed_citing(store, args.quiet))
    return out


def _print(summary: dict, args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps(summary))
        return
    held = summary["held"]["semanticscholar"]
    print(
        f"fetched {summary['pages']:,} pages ({summary['requests']:,} requests, {summary['cached']:,} from the "
        f"cache) in {summary['seconds']} s: {summary['papers_added']:,} papers added, "
        f"{summary['edges_added']:,} citations added"
    )
    if args.around:
        print(
            f"library: {summary['resolved']:,} papers found on Semantic Scholar, {summary['not_found']:,} not "
            f"found, {summary['ambiguous']:,} ambiguous titles skipped"
        )
    print(
        f"from Semantic Scholar the store holds {held['papers']:,} papers, {held['edges']:,} citations, "
        f"{held['sentences']:,} with a citing sentence; from OpenAlex "
        f"{summary['held']['openalex']['papers']:,} papers"
        + (f", from Crossref {crossref:,} reference lists" if (crossref := summary["crossref_lists"]) else "")
        + (f", from arXiv {preprints:,} preprints" if (preprints := summary["preprints"]) else "")
    )
    for problem in summary["problems"]:
        print(f"  note: {problem}")


# -- --dry-run and --estimate -----------------------------------------------------------------------
def _dry_run(args: argparse.Namespace, seeds: list, sl: slices.Slice | None) -> int:
    """The requests a fetch would begin with; nothing is sent, no store is opened."""
    s2, oa = _apis(args, None)
    if sl is not None:
        print("\n".join(slices.dry_run(sl, s2, oa, args.limit)))
        return 0
    from citewise.indexer.fetch.s2 import api_id

    for line in s2.dry_run([api_id(s.best) for s in seeds if s.best], [s.title for s in seeds if not s.best]):
        print(line)
    from citewise.indexer.fetch.http import full_url

    for s in seeds[:3]:
        for direction in ("references", "citations"):
            print("GET " + full_url(*s2.edges_request(s.best or "<matched id>", direction, 0)))
    print(
        f"  then, for each of the {len(seeds):,} papers found, its references and citing papers, 100 a page, "
        f"up to {args.limit:,} each; then arXiv by id for the papers S2 does not know, Crossref by DOI for "
        "the reference lists S2 lacks; then OpenAlex "
        "works by DOI (50 a request) for missing abstracts"
    )
    return 0


def _estimate(args: argparse.Namespace, seeds: list, sl: slices.Slice | None) -> int:
    """Papers, requests, time at the rate limits and store growth, from the APIs' own counts."""
    from citewise.indexer.estimate import STORE_BYTES
    from citewise.indexer.fetch.http import FetchError

    s2, oa = _apis(args, None)
    try:
        if sl is not None:
            _resolve(sl, oa)
            counts = slices.counts(sl, s2, oa, args.limit)
        else:
            counts = _around_counts(s2, seeds, args.limit)
            rate = s2.client.limiter(f"{s2.base}/").rate
            counts["seconds_at_rate_limit"] = round(counts["requests"] / rate)
            counts["pace"] = f"{rate:g} requests/s"
    except FetchError as exc:
        raise UserError(f"{exc}; nothing changed") from None
    per_paper = (
        STORE_BYTES["openalex"][0]
        if sl is not None
        else sum(STORE_BYTES["s2ag-papers"]) + STORE_BYTES["s2ag-abstracts"][0]
    )
    counts["store_growth_bytes"] = (
        counts["papers"] * per_paper + counts.get("edges", 0) * STORE_BYTES["s2ag-citations"][0]
    )
    if args.json:
        print(json.dumps(counts))
    else:
        from .progress import duration

        print(
            f"estimate: {counts['papers']:,} papers, {counts['requests']:,} requests, "
            f"{duration(counts['seconds_at_rate_limit'])} at {counts['pace']}, "
            f"store grows by ~{counts['store_growth_bytes'] / 1e6:,.1f} MB"
        )
    return 0


def _around_counts(s2, seeds: list, limit: int) -> dict:
    """The library resolved (the batch answers: kept in no store), summing each paper's counts."""
    from citewise.indexer.fetch.s2 import BATCH, api_id

    with_id = [s for s in seeds if s.best]
    requests, papers, edges = math.ceil(len(with_id) / BATCH) + (len(seeds) - len(with_id)), 0, 0
    for i in range(0, len(with_id), BATCH):
        for paper in s2.batch([api_id(s.best) for s in with_id[i : i + BATCH]]):
            if paper is None:
                continue
            for n in (paper.get("referenceCount") or 0, paper.get("citationCount") or 0):
                n = min(int(n), limit)
                papers, edges = papers + n, edges + n
                requests += max(1, math.ceil(n / s2.page_size))
    return {"library": len(seeds), "papers": papers, "edges": edges, "requests": requests}
