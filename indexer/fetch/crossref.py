"""Crossref as ``citewise fetch --around`` asks it: one work by DOI (``/works/{doi}``), for its
``reference[]`` list, when Semantic Scholar has no reference list for a library paper.

Why: S2 leaves out the references of some publishers' papers (an empty ``/references`` list for a
paper that cites dozens), and a library paper S2 does not know at all has none from it either;
Crossref holds the reference lists its members deposit, all of them open since 2022, by DOI. The
answer is the ``work`` message ``sources/crossref.py`` already imports: each reference becomes a
citation by DOI, by a DOI or arXiv id in its text, or by its text, matched to a stored paper's
title after the import. Crossref sends no citing sentence: this fills the graph, not the contexts.

Politeness: ``mailto=`` (``--mailto``) joins Crossref's polite pool (10 requests a second, the
``x-rate-limit-*`` headers of its recorded answers; the public pool 5).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from .http import Client, FetchError

DEFAULT_URL = "https://api.crossref.org"
ENV_URL = "CITEWISE_CROSSREF_URL"
POLITE_RATE, PUBLIC_RATE = 10.0, 5.0


@dataclass
class Crossref:
    """Crossref's REST API at ``base`` (``CITEWISE_CROSSREF_URL``); ``mailto`` joins the polite pool."""

    client: Client
    base: str = DEFAULT_URL
    mailto: str = ""

    def work_request(self, doi: str) -> tuple[str, dict[str, Any]]:
        return f"{self.base}/works/{quote(doi, safe='')}", {"mailto": self.mailto or None}

    def work(self, doi: str) -> dict[str, Any] | None:
        """The work message of ``doi``, or None when Crossref holds no such DOI (a 404, whose body
        is the text "Resource not found.", or a DataCite DOI it does not register)."""
        try:
            value = self.client.get(*self.work_request(doi)).json()
        except FetchError as exc:
            if exc.status == 404:
                return None
            raise
        message = value.get("message") if isinstance(value, dict) else None
        if value.get("message-type") != "work" or not isinstance(message, dict):
            raise FetchError(_host(self.base), f"/works/{doi} answered no work message", 502)
        return message


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc


def settings(base: str | None = None, mailto: str | None = None) -> tuple[str, str, float]:
    """(base URL, mailto, requests a second) from the options, else the environment."""
    base = (base or os.environ.get(ENV_URL) or DEFAULT_URL).rstrip("/")
    mailto = mailto or os.environ.get("CITEWISE_MAILTO") or ""
    return base, mailto, (POLITE_RATE if mailto else PUBLIC_RATE)
