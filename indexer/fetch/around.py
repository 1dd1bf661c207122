"""A fetch around a library as one call, shared by ``citewise fetch --around`` and the language
server's ``citewise.fetchAround`` command: the clients of the settings, the seeds of several
``.bib`` files, the phases in their order, and the summary both report.

Why a module of its own: the command line and the server must ask the same requests in the same
order and keep the same state, so a fetch started in the editor and continued from a terminal (or
the other way round) resumes rather than starts over; and the server must stop a fetch between
two pages when its user cancels (``Stopped``), which the command line gets from Ctrl-C.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..filter_seeds import LibraryError
from ..store import Store
from . import arxiv, crossref, openalex, s2
from .http import Cache, Client
from .library import Seed, load_seeds
from .plan import Fetcher, Stopped
from .state import ARXIV_SOURCE, CROSSREF_SOURCE, OPENALEX_SOURCE, S2_SOURCE, counts

CACHE_SUFFIX = ".fetch-cache"


@dataclass
class Endpoints:
    """Where to ask and as whom; ``None`` reads the environment (``CITEWISE_S2_URL``,
    ``CITEWISE_S2_KEY``, ``CITEWISE_OPENALEX_URL``, ``CITEWISE_MAILTO``), as the command line does
    for an option it is not given."""

    s2_url: str | None = None
    s2_key: str | None = None
    openalex_url: str | None = None
    mailto: str | None = None
    cache_days: float = 30.0
    crossref_url: str | None = None
    arxiv_url: str | None = None


def cache_folder(store_path: Path) -> Path:
    """Where a store's kept API answers live (beside it: dropped with it, shared by CLI and server)."""
    return store_path.with_name(store_path.name + CACHE_SUFFIX)


def clients(
    endpoints: Endpoints,
    folder: Path | None,
    sleep: Callable[[float], None] = time.sleep,
    on_wait: Callable[[str], None] | None = None,
) -> tuple[s2.S2, openalex.OpenAlex]:
    """The S2 and OpenAlex APIs over one polite client (rates and key per host, the cache)."""
    s2_base, s2_headers, s2_rate = s2.settings(endpoints.s2_url, endpoints.s2_key)
    oa_base, mailto, oa_rate = openalex.settings(endpoints.openalex_url, endpoints.mailto)
    s2_host, oa_host = urlsplit(s2_base).netloc, urlsplit(oa_base).netloc
    cache = Cache(folder, endpoints.cache_days * 86400) if folder is not None else None
    if cache is not None:
        cache.prune()  # --cache-days: what is older would never be read back
    client = Client(
        # by host, and by base URL: both APIs behind one proxy host still keep a bucket each
        rates={s2_host: s2_rate, oa_host: oa_rate, s2_base: s2_rate, oa_base: oa_rate},
        headers={s2_host: s2_headers},
        cache=cache,
        sleep=sleep,
        on_wait=on_wait,
    )
    return s2.S2(client, s2_base), openalex.OpenAlex(client, oa_base, mailto)


def crossref_of(endpoints: Endpoints, s2_api: s2.S2) -> crossref.Crossref:
    """Crossref over the same client as the other APIs (its own rate; the polite pool with the
    address given for OpenAlex): what ``--around`` asks for the reference lists S2 lacks."""
    base, mailto, rate = crossref.settings(endpoints.crossref_url, endpoints.mailto)
    s2_api.client.rates.setdefault(urlsplit(base).netloc, rate)
    s2_api.client.rates[base] = rate
    return crossref.Crossref(s2_api.client, base, mailto)


def arxiv_of(endpoints: Endpoints, s2_api: s2.S2) -> arxiv.ArXiv:
    """arXiv over the same client, at one request every three seconds: the library's preprints
    too new for S2."""
    base, rate = arxiv.settings(endpoints.arxiv_url)
    s2_api.client.rates.setdefault(urlsplit(base).netloc, rate)
    s2_api.client.rates[base] = rate
    return arxiv.ArXiv(s2_api.client, base)


def stoppable_sleep(stop: threading.Event) -> Callable[[float], None]:
    """A ``sleep`` for the client that ends early, raising :class:`Stopped`, once ``stop`` is set:
    a cancelled fetch must not sit out a rate-limit slot or a minute of ``Retry-After``."""

    def sleep(seconds: float) -> None:
        if stop.wait(seconds) if seconds > 0 else stop.is_set():
            raise Stopped

    return sleep


def seeds_of(paths: Iterable[str | Path]) -> tuple[list[Seed], list[str]]:
    """The papers of several libraries (a draft's ``.bib`` files), once each, and what could not
    be read (one line a file); raises :class:`LibraryError` when none gives a paper."""
    seeds: dict[str, Seed] = {}
    problems: list[str] = []
    for path in paths:
        try:
            for seed in load_seeds(path):
                seeds.setdefault(seed.key, seed)
        except LibraryError as exc:
            problems.append(str(exc))
    if not seeds:
        raise LibraryError("; ".join(problems) or "no library to fetch around")
    return list(seeds.values()), problems


def around(fetcher: Fetcher, seeds: list[Seed], hops: int = 1) -> list[str]:
    """Resolve ``seeds``, then page through their references and citing papers (and, with
    ``hops`` 2, those of the papers found), then arXiv for the preprints S2 does not know, Crossref
    for the reference lists S2 lacks, OpenAlex for abstracts; the S2 refs of the seeds found (none
    found: only arXiv and Crossref are asked)."""
    refs = fetcher.resolve(seeds)
    if not refs:  # S2 knows none: arXiv may have them (new preprints), Crossref their references
        fetcher.arxiv_preprints(seeds)
        fetcher.crossref_references(seeds)
        return refs
    fetcher.expand(refs)
    if hops == 2:
        fetcher.expand(fetcher.neighbours(refs))
    fetcher.arxiv_preprints(seeds)
    fetcher.crossref_references(seeds)
    fetcher.abstracts()
    return refs


def kept(fetcher: Fetcher) -> str:
    """What an interrupted or failed run leaves, for its one line."""
    pages = fetcher.totals.pages
    if not pages:
        return "nothing changed"
    return f"{pages} pages fetched before are kept; run the same command again to continue"


def summary(fetcher: Fetcher, store: Store, seconds: float) -> dict:
    """What a run did and what the store holds from each API (``citewise fetch --json``)."""
    t = fetcher.totals
    stats = fetcher.s2.client.stats
    return {
        "pages": t.pages,
        "papers_added": t.papers,
        "papers_updated": t.updated,
        "edges_added": t.edges,
        "resolved": t.resolved,
        "not_found": t.not_found,
        "ambiguous": t.ambiguous,
        "crossref_lists": t.crossref,
        "preprints": t.preprints,
        "requests": stats.sent,
        "cached": stats.cached,
        "retries": stats.retries,
        "seconds": round(seconds, 1),
        "problems": t.problems[:20],
        "held": {
            "semanticscholar": counts(store, S2_SOURCE),
            "openalex": counts(store, OPENALEX_SOURCE),
            "crossref": counts(store, CROSSREF_SOURCE),
            "arxiv": counts(store, ARXIV_SOURCE),
        },
    }
