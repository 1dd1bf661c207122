"""``citewise fetch`` of a slice of the literature: ``--query WORDS``, ``--field NAME``, ``--venue
NAME``, narrowed by ``--years``, from OpenAlex (filters, cursor paging) and Semantic Scholar's
bulk search (``--query`` only, token paging).

Why both APIs for ``--query``, by default: on the recorded answers each gives an abstract for
about the same share of papers (S2 search 68-85 %, OpenAlex 79 %), but they add different things.
OpenAlex lists each work's references (the store's citation graph) and slices by field and venue;
S2's bulk search brings 1,000 papers a request, with Semantic Scholar corpus ids, so a later
``citewise fetch --around STORE`` finds them without a title match and gets how each is cited
(citing sentences), which only S2 gives. A paper both give is one stored paper (DOI, ids).
``--field`` and ``--venue`` are OpenAlex's: S2 names neither the same way, so those slices are
OpenAlex's alone.

Names are resolved first (``indexer/fetch/names.py``), before the store is opened: a name that
matches nothing or several things is one line and nothing else happens.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import Any

from .cli_common import UserError

FROM = ("openalex", "s2", "both")


@dataclass
class Slice:
    """What a slice fetch asks: the words, names and years given, the APIs asked, and (once the
    names are resolved) the OpenAlex filter and the lines saying what each name resolved to."""

    query: str | None
    field: str | None
    venue: str | None
    years: str | None
    apis: tuple[str, ...]
    filter: str = ""
    lookups: int = 0  # requests the name lookups cost
    # dataclasses.field spelled out: the attribute ``field`` above shadows the bare name here.
    notes: list[str] = dataclasses.field(default_factory=list)
    chosen: dict[str, Any] = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        parts = [
            f"--{k} {v!r}"
            for k, v in (("query", self.query), ("field", self.field), ("venue", self.venue))
            if v
        ]
        return " ".join(parts + ([f"--years {self.years}"] if self.years else []))


def plan(args: argparse.Namespace) -> Slice:
    """The slice of the options, checked: which APIs (``--from``), and what goes together."""
    named = bool(args.field or args.venue)
    source = args.source or ("openalex" if named else "both")
    if named and source != "openalex":
        raise UserError(
            f"--from {source}: --field and --venue are OpenAlex filters (Semantic Scholar names fields "
            "and venues otherwise); use --from openalex, or --query alone with --from s2"
        )
    apis = ("openalex", "s2") if source == "both" else (source,)
    if args.years:
        _years_filter(args.years)  # a bad range is one line before anything is asked
    return Slice(args.query, args.field, args.venue, args.years, apis)


def _years_filter(years: str) -> str:
    from citewise.indexer.fetch.openalex import year_filter

    try:
        return year_filter(years)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def resolve(sl: Slice, oa: Any) -> None:
    """The OpenAlex filter of the slice, its names resolved (a request or three each)."""
    from citewise.indexer.fetch.names import NameError_, resolve_field, resolve_venue
    from citewise.indexer.fetch.openalex import topic_filter, with_years

    parts = [topic_filter(sl.query, None)] if sl.query else []
    for option, name, resolver in (("field", sl.field, resolve_field), ("venue", sl.venue, resolve_venue)):
        if not name or "openalex" not in sl.apis:
            continue
        try:
            choice = resolver(oa, name)
        except NameError_ as exc:
            raise UserError(f"{exc}; nothing fetched") from None
        sl.lookups += 0 if choice.why == "given by its id" else (3 if option == "field" else 1)
        parts.append(choice.entity.filter)
        sl.notes.append(choice.note(option, name))
        sl.chosen[option] = {"kind": choice.entity.kind, "id": choice.entity.id, "name": choice.entity.name}
    sl.filter = with_years(",".join(parts), sl.years)


def say_notes(sl: Slice) -> None:
    """What each name resolved to, always (even with ``-q``): a choice is never made silently."""
    for note in sl.notes:
        print(f"citewise: note: {note}", file=sys.stderr)


def run(fetcher: Any, sl: Slice) -> None:
    """Each API's listing in turn, resumable (each page stored with its cursor or token)."""
    if "openalex" in sl.apis:
        fetcher.query(sl.filter)
    if "s2" in sl.apis and sl.query:
        fetcher.bulk(sl.query, sl.years)
    if not fetcher.totals.listed and not fetcher.totals.pages and _all_new(fetcher, sl):
        raise UserError(f"no paper matches {sl.describe()} ({' and '.join(_names(sl))}); nothing changed")


def _names(sl: Slice) -> list[str]:
    return [{"openalex": "OpenAlex", "s2": "Semantic Scholar"}[a] for a in sl.apis]


def _all_new(fetcher: Any, sl: Slice) -> bool:
    """Whether no listing of the slice was stored before (a finished one asks nothing again)."""
    from citewise.indexer.fetch import state

    names = [f"openalex:{sl.filter}"] if "openalex" in sl.apis else []
    names += [f"s2bulk:{sl.query}|{sl.years or ''}"] if "s2" in sl.apis and sl.query else []
    return not any(state.load(fetcher.store, n).get(n) for n in names)


def dry_run(sl: Slice, s2: Any, oa: Any, limit: int) -> list[str]:
    """The requests a slice fetch would begin with (nothing is sent: names are not resolved)."""
    from citewise.indexer.fetch.http import full_url
    from citewise.indexer.fetch.names import FIELD_LEVELS, field_by_id, source_by_id
    from citewise.indexer.fetch.openalex import topic_filter, with_years

    lines, parts = [], [topic_filter(sl.query, None)] if sl.query else []
    if "openalex" in sl.apis:
        for option, name, by_id in (("field", sl.field, field_by_id), ("venue", sl.venue, source_by_id)):
            if not name:
                continue
            if (given := by_id(name)) is not None:
                parts.append(given.filter)
                continue
            paths = [p for p, _k, _f in FIELD_LEVELS] if option == "field" else ["sources"]
            lines += ["GET " + full_url(*oa.entities_request(p, name)) for p in paths]
            parts.append(f"@{option}@")
        url = full_url(*oa.works_request(with_years(",".join(parts), sl.years)))
        for option in ("field", "venue"):  # what a name resolves to is known once it is asked
            url = url.replace(f"%40{option}%40", f"<the filter of the {option} found>")
        lines.append("GET " + url)
        lines.append(f"  then the next cursor pages ({oa.per_page} works each), up to {limit:,} works")
    if "s2" in sl.apis and sl.query:
        lines.append("GET " + full_url(*s2.bulk_request(sl.query, sl.years, None)))
        lines.append(f"  then the next token pages (1,000 papers each), up to {limit:,} papers")
    return lines


def counts(sl: Slice, s2: Any, oa: Any, limit: int) -> dict:
    """Papers, requests and seconds at each API's rate limit, from the APIs' own counts
    (OpenAlex ``meta.count``; the bulk search's ``total``, its first page, kept for the fetch)."""
    from citewise.indexer.fetch.s2 import BULK_PAGE

    by_api: dict[str, dict[str, int]] = {}
    seconds = 0.0
    if "openalex" in sl.apis:
        n = min(oa.count(sl.filter), limit)
        asked = 1 + math.ceil(n / oa.per_page)
        by_api["openalex"] = {"papers": n, "requests": asked}
        seconds += (asked + sl.lookups) / _rate(oa)
    if "s2" in sl.apis and sl.query:
        n = min(s2.bulk(sl.query, sl.years).total, limit)
        asked = max(1, math.ceil(n / BULK_PAGE))
        by_api["semanticscholar"] = {"papers": n, "requests": asked}
        seconds += asked / _rate(s2)
    paces = {"openalex": ("OpenAlex", oa), "semanticscholar": ("Semantic Scholar", s2)}
    return {
        "papers": sum(api["papers"] for api in by_api.values()),
        "requests": sl.lookups + sum(api["requests"] for api in by_api.values()),
        "seconds_at_rate_limit": round(seconds),
        "by_api": by_api,
        "pace": " and ".join(f"{_rate(paces[k][1]):g} requests/s ({paces[k][0]})" for k in by_api),
    }


def _rate(api: Any) -> float:
    """Requests a second the client allows the API at ``api.base`` (its own bucket)."""
    return api.client.limiter(f"{api.base}/").rate
