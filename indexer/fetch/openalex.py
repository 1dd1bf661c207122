"""OpenAlex as ``citewise fetch`` asks it: works by DOI in batches (``filter=doi:a|b|...``),
slices (``--query``, ``--field``, ``--venue``, ``--years``) page by page with a cursor, the
entity lists a ``--field`` or ``--venue`` name is resolved against (``/fields``, ``/subfields``,
``/topics``, ``/sources`` with ``search=``: ``names.py``), and ``meta.count`` for ``--estimate``.

Why OpenAlex beside Semantic Scholar: its works carry abstracts S2 may not ship, and its filters
slice a topic or years server-side; its answers are the ``/works`` pages that
``sources/openalex.py`` already imports. The polite pool (``mailto=``, ten requests a second)
is used whenever an address is given (``--mailto`` / ``CITEWISE_MAILTO``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from .http import Client, FetchError

DEFAULT_URL = "https://api.openalex.org"
ENV_URL, ENV_MAILTO = "CITEWISE_OPENALEX_URL", "CITEWISE_MAILTO"
PER_PAGE = 200  # the most a page holds
ENTITIES = 25  # candidates a name lookup (--field, --venue) asks for
DOI_BATCH = 50  # DOIs a filter holds (OpenAlex allows 100 values; URLs stay short)
POLITE_RATE, COMMON_RATE = 10.0, 5.0  # the common pool answered RateLimit-Limit: 5
_YEARS = re.compile(r"(\d{4})?-(\d{4})?|(\d{4})")


@dataclass
class Page:
    """One cursor page: the decoded answer and the cursor of the next page (None after the last)."""

    value: dict[str, Any]
    next: str | None

    @property
    def results(self) -> list[Any]:
        return self.value.get("results") or []


@dataclass
class OpenAlex:
    """OpenAlex at ``base`` (``CITEWISE_OPENALEX_URL``); ``mailto`` joins the polite pool."""

    client: Client
    base: str = DEFAULT_URL
    mailto: str = ""
    per_page: int = PER_PAGE

    def works_request(self, filt: str, cursor: str = "*", per_page: int | None = None) -> tuple[str, dict]:
        params = {"filter": filt, "per-page": per_page or self.per_page, "mailto": self.mailto or None}
        params["cursor"] = cursor
        return f"{self.base}/works", params

    def works(self, filt: str, cursor: str = "*") -> Page:
        """One page of the works passing ``filt``, from ``cursor`` (``*``: the first)."""
        value = self.client.get(*self.works_request(filt, cursor)).json()
        if not isinstance(value, dict) or not isinstance(value.get("results"), list):
            raise FetchError(_host(self.base), "a /works page without 'results'", 502)
        meta = value.get("meta") or {}
        nxt = meta.get("next_cursor") if isinstance(meta, dict) else None
        # A page shorter than asked is the last: its cursor would only lead to an empty page.
        last = len(value["results"]) < self.per_page or not (isinstance(nxt, str) and nxt)
        return Page(value, None if last else nxt)

    def count(self, filt: str) -> int:
        """How many works pass ``filt`` (``meta.count`` of a one-work page): ``--estimate``."""
        url, params = self.works_request(filt, per_page=1)
        del params["cursor"]
        value = self.client.get(url, params).json()
        meta = value.get("meta") if isinstance(value, dict) else None
        return int(meta.get("count") or 0) if isinstance(meta, dict) else 0

    def entities_request(self, path: str, search: str) -> tuple[str, dict]:
        return f"{self.base}/{path}", {"search": search, "per-page": ENTITIES, "mailto": self.mailto or None}

    def entities(self, path: str, search: str) -> list[Any]:
        """The ``results`` of ``/sources``, ``/fields``, ``/subfields`` or ``/topics`` whose name
        matches ``search`` (most relevant first): what ``--venue`` and ``--field`` resolve against."""
        value = self.client.get(*self.entities_request(path, search)).json()
        if not isinstance(value, dict) or not isinstance(value.get("results"), list):
            raise FetchError(_host(self.base), f"a /{path} answer without 'results'", 502)
        return value["results"]

    def work(self, ident: str, select: str | None = None) -> dict[str, Any] | None:
        """One work by W id or ``https://doi.org/...``; None when OpenAlex has none (a 404, whose
        body is an HTML page, not JSON)."""
        from urllib.parse import quote

        try:
            value = self.client.get(f"{self.base}/works/{quote(ident, safe=':/')}", {"select": select}).json()
        except FetchError as exc:
            if exc.status == 404:
                return None
            raise
        return value if isinstance(value, dict) else None


def doi_filter(dois: list[str]) -> str:
    """``doi:a|b|...``: up to :data:`DOI_BATCH` works in one request."""
    return "doi:" + "|".join(dois)


def topic_filter(query: str, years: str | None) -> str:
    """The ``filter=`` of a ``--query`` slice: words in the title or abstract, and the years."""
    parts = [f"title_and_abstract.search:{query.replace(',', ' ')}"] if query else []
    return with_years(",".join(parts), years)


def with_years(filt: str, years: str | None) -> str:
    """``filt`` narrowed to ``--years`` (ValueError for a range it cannot read)."""
    return ",".join(p for p in (filt, year_filter(years) if years else "") if p)


def year_filter(years: str) -> str:
    """``2015-2020``, ``2015-``, ``-2010`` or ``2019`` as OpenAlex dates (ValueError otherwise)."""
    m = _YEARS.fullmatch(years.strip())
    if not m or not any(m.groups()):
        raise ValueError(f"--years {years!r}: expected 2015-2020, 2015-, -2010 or 2019")
    if m.group(3):
        return f"publication_year:{m.group(3)}"
    start, end = m.group(1), m.group(2)
    dates = [f"from_publication_date:{start}-01-01"] if start else []
    return ",".join(dates + ([f"to_publication_date:{end}-12-31"] if end else []))


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc


def settings(base: str | None = None, mailto: str | None = None) -> tuple[str, str, float]:
    """(base URL, mailto, requests a second) from the options, else the environment."""
    base = (base or os.environ.get(ENV_URL) or DEFAULT_URL).rstrip("/")
    mailto = mailto or os.environ.get(ENV_MAILTO) or ""
    return base, mailto, (POLITE_RATE if mailto else COMMON_RATE)
