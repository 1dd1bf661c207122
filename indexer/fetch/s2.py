"""Semantic Scholar's Graph API as ``citewise fetch`` asks it: ids resolved in batches
(``POST paper/batch``), a title matched only when unambiguous (``paper/search/match``), and a
paper's references and citing papers page by page, with the citing sentences (``contexts``),
their ``intents`` and ``isInfluential``: what tells the store how each paper is cited; and the
bulk search (``paper/search/bulk``, 1,000 papers a page, token paging) for a ``--query`` slice.

Why these endpoints: the batch takes 500 ids a request (one request for a whole ``.bib``); the
edge endpoints are the only public source of citing sentences short of the partner-key S2AG
dumps. Pages hold 100 edges: with contexts, 1,000 a page times out on the API's side (a
recorded 504). The answers are the Graph API's JSON, read by ``sources/s2ag.py`` as any saved
API file is, so a fetched paper is stored exactly as an imported one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .http import Client, FetchError

DEFAULT_URL = "https://api.semanticscholar.org/graph/v1"
ENV_URL, ENV_KEY = "CITEWISE_S2_URL", "CITEWISE_S2_KEY"
PAPER_FIELDS = (
    "abstract,authors,citationCount,corpusId,externalIds,fieldsOfStudy,influentialCitationCount,"
    "isOpenAccess,journal,openAccessPdf,paperId,publicationDate,publicationTypes,publicationVenue,"
    "referenceCount,s2FieldsOfStudy,title,url,venue,year"
)
EDGE_FIELDS = "contexts,intents,contextsWithIntent,isInfluential," + PAPER_FIELDS
BATCH = 500  # the most ids paper/batch takes
BULK_PAGE = 1_000  # papers a /paper/search/bulk page holds
PAGE = 100  # edges a page
MAX_OFFSET = 9_999  # the edge endpoints refuse offset + limit past 10,000 (a 400)
PUBLIC_RATE, KEY_RATE = 1.0, 10.0  # requests a second (the public pool is shared; keys get more)
# Our refs (indexer/sources/ids.py) as the API spells ids in a path or a batch.
_API_PREFIX = {"corpusid": "CorpusId:", "doi": "DOI:", "arxiv": "ARXIV:", "acl": "ACL:", "s2": ""}


def api_id(ref: str) -> str:
    """``corpusid:123`` -> ``CorpusId:123``, ``arxiv:...`` -> ``ARXIV:...``, ``acl:...`` ->
    ``ACL:...``, ``s2:<sha>`` -> the sha: how the Graph API names a paper in a path or a batch. A
    DOI goes bare (the API takes ``10.2139/ssrn.2250500`` as it takes ``DOI:10.2139/...``)."""
    scheme, _, value = ref.partition(":")
    if not ref.startswith("10.") and scheme in _API_PREFIX and value:
        return _API_PREFIX[scheme] + value
    return ref


@dataclass
class Page:
    """One page of a paper's references or citing papers: the decoded answer, and the offset of
    the next page (None after the last)."""

    value: dict[str, Any]
    offset: int
    next: int | None

    @property
    def count(self) -> int:
        return len(self.value.get("data") or [])


@dataclass
class BulkPage:
    """One page of ``/paper/search/bulk``: its papers, the token of the next page (None after the
    last) and the total the search matches (``--estimate``)."""

    data: list[Any]
    next: str | None
    total: int


@dataclass
class S2:
    """The Graph API at ``base`` (``CITEWISE_S2_URL`` for a mirror, a proxy or the test server)."""

    client: Client
    base: str = DEFAULT_URL
    paper_fields: str = PAPER_FIELDS
    edge_fields: str = EDGE_FIELDS
    page_size: int = PAGE
    bulk_fields: str = PAPER_FIELDS

    def batch(self, ids: list[str]) -> list[dict[str, Any] | None]:
        """The papers of ``ids`` (API spellings), in order; ``None`` where S2 knows no such paper."""
        value = self.client.post(
            f"{self.base}/paper/batch", {"fields": self.paper_fields}, {"ids": ids}
        ).json()
        if not isinstance(value, list) or len(value) != len(ids):
            raise FetchError(
                _host(self.base),
                f"paper/batch answered {type(value).__name__}, not a list of {len(ids)}",
                502,
            )
        return [p if isinstance(p, dict) else None for p in value]

    def match(self, title: str) -> dict[str, Any] | None:
        """The paper S2 matches ``title`` to, or None (no match is a 404 or an empty ``data``)."""
        try:
            value = self.client.get(
                f"{self.base}/paper/search/match", {"query": title, "fields": self.paper_fields}
            ).json()
        except FetchError as exc:
            if exc.status == 404:
                return None
            raise
        data = value.get("data") if isinstance(value, dict) else None
        return data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else None

    def edges(self, ref: str, direction: str, offset: int) -> Page:
        """One page of ``direction`` (``references`` or ``citations``) of the paper ``ref``."""
        value = self.client.get(*self.edges_request(ref, direction, offset)).json()
        if not isinstance(value, dict) or not isinstance(value.get("data"), list):
            raise FetchError(_host(self.base), f"a /{direction} page without 'data'", 502)
        nxt = value.get("next")
        return Page(value, offset, int(nxt) if isinstance(nxt, int) and nxt > offset else None)

    def edges_request(self, ref: str, direction: str, offset: int) -> tuple[str, dict[str, Any]]:
        limit = max(1, min(self.page_size, MAX_OFFSET + 1 - offset))
        params = {"fields": self.edge_fields, "offset": offset, "limit": limit}
        return f"{self.base}/paper/{api_id(ref)}/{direction}", params

    def bulk_request(self, query: str, years: str | None, token: str | None) -> tuple[str, dict[str, Any]]:
        params = {"query": query, "fields": self.bulk_fields, "year": years or None, "token": token or None}
        return f"{self.base}/paper/search/bulk", params

    def bulk(self, query: str, years: str | None = None, token: str | None = None) -> BulkPage:
        """One page (up to 1,000 papers) of the bulk search for ``query`` in ``years``, from
        ``token`` (None: the first page); its ``token`` leads to the next (None after the last)."""
        value = self.client.get(*self.bulk_request(query, years, token)).json()
        if not isinstance(value, dict) or not isinstance(value.get("data"), list):
            raise FetchError(_host(self.base), "a /paper/search/bulk page without 'data'", 502)
        nxt = value.get("token")
        total = value.get("total")
        return BulkPage(
            value["data"],
            nxt if isinstance(nxt, str) and nxt else None,
            total if isinstance(total, int) else 0,
        )

    def dry_run(self, ids: Iterable[str], titles: Iterable[str]) -> list[str]:
        """The requests a fetch would begin with, one line each (``--dry-run``)."""
        from .http import full_url

        ids = list(ids)
        lines = [
            f"POST {full_url(f'{self.base}/paper/batch', {'fields': self.paper_fields})}  ids={ids[i : i + BATCH]}"
            for i in range(0, len(ids), BATCH)
        ]
        lines += [
            "GET " + full_url(f"{self.base}/paper/search/match", {"query": t, "fields": self.paper_fields})
            for t in titles
        ]
        return lines


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc


def settings(base: str | None = None, key: str | None = None) -> tuple[str, dict[str, str], float]:
    """(base URL, headers, requests a second) from the options, else the environment."""
    base = (base or os.environ.get(ENV_URL) or DEFAULT_URL).rstrip("/")
    key = key or os.environ.get(ENV_KEY) or ""
    return base, ({"x-api-key": key} if key else {}), (KEY_RATE if key else PUBLIC_RATE)
