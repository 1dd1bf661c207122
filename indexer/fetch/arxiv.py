"""arXiv as ``citewise fetch --around`` asks it: the library's preprints that Semantic Scholar does
not know yet, by arXiv id (``/api/query?id_list=a,b,...``, up to 100 a request), as Atom entries.

Why: a draft cites last week's preprints; S2 and OpenAlex index new arXiv papers within days, not
at once, so a library paper with an arXiv id that S2 answers ``null`` for is most often one too
new for it. arXiv itself has it the moment it is announced: title, abstract, authors, date,
categories, and the DOI and journal reference once published. No references and no citing
papers: the store gets the paper, so it can be suggested; a later run with ``--retry-missing``
gets its lists once S2 knows it.

Each entry is turned into the shape of a line of arXiv's metadata snapshot and read by the
snapshot's importer (``sources/arxiv.py``), so a fetched preprint is stored exactly as the same
paper from the snapshot. arXiv asks for no more than one request every three seconds.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

from ..sources.ids import arxiv_id
from .http import Client, FetchError

DEFAULT_URL = "https://export.arxiv.org/api"
ENV_URL = "CITEWISE_ARXIV_URL"
RATE = 1 / 3  # arXiv's terms: one request every three seconds
BATCH = 100  # ids a request (max_results)
_NS = {"a": "http://www.w3.org/2005/Atom", "arxiv": "http://arxiv.org/schemas/atom"}


@dataclass
class ArXiv:
    """arXiv's API at ``base`` (``CITEWISE_ARXIV_URL``)."""

    client: Client
    base: str = DEFAULT_URL

    def lookup_request(self, ids: list[str]) -> tuple[str, dict[str, Any]]:
        params = {"id_list": ",".join(ids), "sortBy": "relevance", "sortOrder": "descending"}
        return f"{self.base}/query", {**params, "start": 0, "max_results": BATCH}

    def lookup(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The entries of ``ids`` (at most :data:`BATCH`) as snapshot lines, by version-less id;
        an id arXiv does not know is absent (its feed has no entry for it)."""
        try:
            response = self.client.get(*self.lookup_request(ids))
        except FetchError as exc:
            if exc.status == 400:  # a feed whose one entry names the id it cannot read
                shown = ",".join(ids)
                shown = shown if len(shown) <= 80 else shown[:77] + "..."
                raise FetchError(exc.host, f"HTTP 400: arXiv cannot read an id of {shown}", 400) from None
            raise
        try:
            feed = ET.fromstring(response.body)
        except ET.ParseError as exc:
            raise FetchError(response.host, f"a truncated or invalid Atom answer ({exc})", 502) from None
        if feed.tag != f"{{{_NS['a']}}}feed":
            raise FetchError(response.host, f"answered <{feed.tag}>, not an Atom feed", 502)
        lines = (snapshot_line(e) for e in feed.findall("a:entry", _NS))
        return {line["id"]: line for line in lines if line is not None}


def snapshot_line(entry: ET.Element) -> dict[str, Any] | None:
    """One Atom entry as a line of the metadata snapshot (``id``, ``title``, ``abstract``,
    ``authors``, ``doi``, ``journal-ref``, ``categories``, ``versions``); None for an entry that
    is no paper (an error entry has no arXiv id in its ``<id>``)."""

    def text(path: str) -> str:
        node = entry.find(path, _NS)
        return " ".join((node.text or "").split()) if node is not None else ""

    aid = arxiv_id(text("a:id").rsplit("/abs/", 1)[-1]) if "/abs/" in text("a:id") else ""
    if not aid:
        return None
    names = [" ".join((n.text or "").split()) for n in entry.findall("a:author/a:name", _NS)]
    terms = [c.get("term", "") for c in entry.findall("a:category", _NS)]
    primary = entry.find("arxiv:primary_category", _NS)
    if primary is not None and primary.get("term") in terms:  # the primary category first
        terms.insert(0, terms.pop(terms.index(primary.get("term", ""))))
    return {
        "id": aid,
        "title": text("a:title"),
        "abstract": text("a:summary"),
        "authors": ", ".join(n for n in names if n),
        "doi": text("arxiv:doi"),
        "journal-ref": text("arxiv:journal_ref"),
        "categories": " ".join(t for t in terms if t),
        "versions": [{"version": "v1", "created": text("a:published")}],
    }


def settings(base: str | None = None) -> tuple[str, float]:
    """(base URL, requests a second) from the option, else the environment."""
    return (base or os.environ.get(ENV_URL) or DEFAULT_URL).rstrip("/"), RATE
