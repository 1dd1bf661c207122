"""A loopback HTTP server that replays the recorded API responses of
``../shared/data/samples/api/<api>/`` (``requests.tsv``: method + host + path and query -> a
response file with its status and content type), for the ``citewise fetch`` tests.

Why match on decoded query parameters (as a multiset) rather than the raw string: a client may
write ``fields=a,b`` or ``fields=a%2Cb`` and order parameters its own way; the API reads them
the same (the bulk search's ``offset`` and ``limit``, which it does not read, are dropped);
and on the path in lower case (S2 reads ``CorpusId:`` and ``CorpusID:`` alike, as the
recordings show: a batch asked with one, a path with the other). A POST also matches on its JSON body where one was recorded (the batch endpoint:
the same URL answers differently for different ids). A URL recorded more than once is answered
in the recorded order (``interaction``: 429, 429, then 200), the last answer repeating.

Nothing here reaches the network: the server binds 127.0.0.1 on a free port. ``requests``
(what was asked, in order) and ``misses`` (asked but not recorded: answered 599) let tests say
what was sent.
"""

from __future__ import annotations

import csv
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit

from tests.conftest import SHARED_DATA, require

API_SAMPLES = SHARED_DATA / "samples" / "api"
HOSTS = {
    "s2-graph": "api.semanticscholar.org",
    "openalex": "api.openalex.org",
    "crossref": "api.crossref.org",
    "arxiv": "export.arxiv.org",
}


@dataclass
class Recorded:
    status: int
    content_type: str
    file: Path
    headers: dict[str, str] = field(default_factory=dict)


def _key(method: str, path_query: str, body: str = "") -> tuple:
    parts = urlsplit(path_query)
    params = tuple(sorted((k, v) for k, v in parse_qsl(parts.query) if v != ""))
    if parts.path.endswith("/paper/search/bulk"):
        # The bulk search pages by token and reads no offset or limit (1,000 a page); the client
        # that recorded it sent both anyway. Matched without them, as the API reads the request.
        params = tuple(p for p in params if p[0] not in ("offset", "limit"))
    try:
        body_key = json.dumps(json.loads(body), sort_keys=True) if body else ""
    except ValueError:
        body_key = body
    return method.upper(), unquote(parts.path).lower(), params, body_key


def load(api: str) -> dict[tuple, list[Recorded]]:
    """The recorded answers of one API folder (its main host only), by request, in order."""
    folder = require(API_SAMPLES / api)
    rows = list(csv.DictReader(open(folder / "requests.tsv", encoding="utf-8"), delimiter="\t"))
    rows.sort(key=lambda r: (r["cassette"], int(r["interaction"] or 0)))
    table: dict[tuple, list[Recorded]] = {}
    for row in rows:
        if row["host"] != HOSTS[api]:
            continue
        headers = dict(h.split("=", 1) for h in row["notable_headers"].split("; ") if "=" in h)
        headers.pop("content-encoding", None)
        rec = Recorded(int(row["status"]), row["content_type"], folder / row["file"], headers)
        table.setdefault(_key(row["method"], row["path_query"], row["request_body"]), []).append(rec)
    return table


class ReplayServer:
    """``with ReplayServer("s2-graph") as s2: ... s2.url`` (the base URL: ``http://127.0.0.1:PORT``).

    ``extra`` answers requests before the recordings: ``extra[(method, path)] = fn(query, body)``
    returning ``(status, content_type, body bytes, headers)`` (a fault the recordings lack)."""

    def __init__(self, api: str, extra: dict[tuple[str, str], Callable] | None = None) -> None:
        self.table = load(api)
        self.extra = extra or {}
        self.requests: list[tuple[str, str, str]] = []
        self.misses: list[str] = []
        self.keys: list[str | None] = []  # the x-api-key header of each request, in order
        self._served: dict[tuple, int] = {}
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> ReplayServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def rewind(self) -> None:
        """Answer each URL from its first recorded answer again (a new client run)."""
        with self._lock:
            self._served.clear()

    def answer(self, method: str, path_query: str, body: str) -> tuple[int, str, bytes, dict[str, str]]:
        with self._lock:
            self.requests.append((method, path_query, body))
            parts = urlsplit(path_query)
            if (fn := self._extra(method, unquote(parts.path))) is not None:
                return fn(parts.query, body)
            key = _key(method, path_query, body)
            answers = self.table.get(key) or self.table.get(key[:3] + ("",))
            if not answers:
                self.misses.append(f"{method} {path_query} {body}")
                return 599, "text/plain", b"not recorded", {}
            n = self._served.get(key, 0)
            self._served[key] = n + 1
            rec = answers[min(n, len(answers) - 1)]
            return rec.status, rec.content_type, rec.file.read_bytes(), rec.headers

    def _extra(self, method: str, path: str) -> Callable | None:
        """The extra answer for ``path``: by exact path, else by its last segment (``citations``)."""
        return self.extra.get((method, path)) or self.extra.get((method, "*/" + path.rsplit("/", 1)[-1]))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, body: str) -> None:
                with server._lock:
                    server.keys.append(self.headers.get("x-api-key"))
                status, ctype, data, headers = server.answer(self.command, self.path, body)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    if name.lower() in ("retry-after",):
                        self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - the http.server spelling
                self._reply("")

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                self._reply(self.rfile.read(n).decode("utf-8"))

            def log_message(self, *args: object) -> None:
                pass

        return Handler


# -- a library's fetch on the recorded answers ------------------------------------------------------
S2_RESPONSES = API_SAMPLES / "s2-graph" / "responses"
OPENALEX_LAST_EMPTY = "works_filter-openalex-W3045921891-W3046863325_perpage200_cursor-p2_last-empty.json"
BATCH_3IDS = "paper_batch_3ids_2023.json"  # its papers' DOIs: what a .bib of them holds
BATCH_DOIS = ["10.2139/ssrn.288970", "10.2139/ssrn.2250500", "10.1257/rct.1355"]


def recorded_pages(pattern: str, delay: float = 0.0) -> Callable:
    """Answer a list of any paper with the recorded pages of one (by offset), ``delay`` s each
    (the lists of a test library's papers were not recorded; these stand in for them)."""

    def answer(query: str, body: str) -> tuple:
        time.sleep(delay)
        offset = parse_qs(query).get("offset", ["0"])[0]
        path = S2_RESPONSES / pattern.format(offset=offset)
        if not path.exists():
            return 404, "application/json", b'{"error": "not recorded"}', {}
        return 200, "application/json", path.read_bytes(), {}

    return answer


def batch_by_doi(query: str, body: str) -> tuple:
    """``paper/batch`` for ids spelled as DOIs: the recorded papers of :data:`BATCH_3IDS` whose
    DOI was asked, ``null`` for the others, in the order asked. The recordings hold this batch
    only as one client spelled its ids (corpus id, DOI, paper id); a ``.bib`` gives DOIs."""
    papers = json.loads((S2_RESPONSES / BATCH_3IDS).read_bytes())
    by_doi = {p["externalIds"]["DOI"].lower(): p for p in papers}
    answer = [by_doi.get(str(i).lower()) for i in json.loads(body)["ids"]]
    return 200, "application/json", json.dumps(answer).encode(), {}


def around_servers(delay: float = 0.0, by_doi: bool = False) -> tuple[ReplayServer, ReplayServer]:
    """S2 and OpenAlex replays for a fetch around a library: every paper's references and citing
    papers are the recorded pages of two real papers (``delay`` s a page), OpenAlex answers its
    recorded empty last page (no abstracts to add); with ``by_doi``, :func:`batch_by_doi`."""
    extra: dict[tuple[str, str], Callable] = {
        ("GET", "*/references"): recorded_pages(
            "paper_CorpusID-1033682_references_offset{offset}_limit100.json", delay
        ),
        ("GET", "*/citations"): recorded_pages(
            "paper_CorpusID-14514057_citations_offset{offset}_limit100.json", delay
        ),
    }
    if by_doi:
        extra[("POST", "*/batch")] = batch_by_doi
    s2 = ReplayServer("s2-graph", extra)
    empty = (API_SAMPLES / "openalex" / "responses" / OPENALEX_LAST_EMPTY).read_bytes()
    oa = ReplayServer("openalex", {("GET", "/works"): lambda q, b: (200, "application/json", empty, {})})
    return s2, oa


# -- the simulated APIs over the ACL graph, where the recordings lack a case ---------------------
def simulator_module():
    """``bench/fetch_simulator.py`` (bench/ is not a package), skipping when the ACL data is absent."""
    import importlib.util
    import sys

    from tests.conftest import REPO

    require(SHARED_DATA / "acl-anthology" / "xml")
    require(SHARED_DATA / "citations" / "acl-citation-edges.tsv")
    if "fetch_simulator" in sys.modules:
        return sys.modules["fetch_simulator"]
    spec = importlib.util.spec_from_file_location("fetch_simulator", REPO / "bench" / "fetch_simulator.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fetch_simulator"] = module
    spec.loader.exec_module(module)
    return module
