"""A loopback HTTP server that replays the recorded API responses of
``../shared/data/samples/api/<api>/`` (``requests.tsv``: method + host + path and query -> a
response file with its status and content type), for the ``citewise fetch`` tests.

Why match on decoded query parameters (as a multiset) rather than the raw string: a client may
write ``fields=a,b`` or ``fields=a%2Cb`` and order parameters its own way; the API reads them
the same; and on the path in lower case (S2 reads ``CorpusId:`` and ``CorpusID:`` alike, as the
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
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

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
