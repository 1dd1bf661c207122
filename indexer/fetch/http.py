"""One polite HTTP client for the scholarly APIs: timeouts, a per-host rate limit, exponential
back-off with jitter on 429 and 5xx (honouring ``Retry-After``), and a response cache by URL.

Why ``requests`` and a hand-written back-off rather than a retry library: ``requests`` is pure
Python, well kept, reads the proxy settings of the environment (``HTTPS_PROXY``: institutional
proxies) and tells a proxy error from a refused connection; the back-off is twenty lines, and
keeping it here lets the rate limiter, the cache and the progress report see every wait
(``urllib3.Retry`` sleeps out of sight, and tenacity or stamina would add a dependency for the
same twenty lines). The client is synchronous on purpose: every API allows one to a few dozen
requests a second, which one thread reaches.

Errors: every failure the user must hear about is a :class:`FetchError` naming the host and what
went wrong in one line (``could not reach api.openalex.org: ...``); callers add what was kept.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_TRIES = 6
NETWORK_TRIES = 3  # no answer at all (refused, no route, DNS): give up sooner, the cause rarely passes
BASE_DELAY = 1.0  # seconds before the first retry (then 2, 4, 8... with jitter)
MAX_DELAY = 60.0
TIMEOUT = (10.0, 60.0)  # connect, read: a /citations page with contexts can take 30 s to build
USER_AGENT = "citewise (https://github.com/citewise/citewise; citewise fetch)"


class FetchError(Exception):
    """A request that could not be answered usefully, in one line for the user.

    ``status`` is the HTTP status (0 when no answer came: no network, a proxy error, a timeout);
    callers test it for the statuses they handle themselves (404: an unknown paper)."""

    def __init__(self, host: str, why: str, status: int = 0) -> None:
        super().__init__(f"could not reach {host}: {why}" if status == 0 else f"{host}: {why}")
        self.host, self.why, self.status = host, why, status


@dataclass
class Response:
    """A response as the callers need it: status, body, content type, and whether it came from
    the cache (a cached answer costs no request and no wait)."""

    url: str
    status: int
    body: bytes
    content_type: str = ""
    cached: bool = False
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc

    def json(self) -> Any:
        """The body as JSON; an HTML page or an empty body (a proxy's login page, a 404 page) is a
        :class:`FetchError` saying so, not a decoding traceback."""
        text = self.body.decode("utf-8", errors="replace").strip()
        if not text:
            raise FetchError(self.host, f"an empty answer (HTTP {self.status}) where JSON was expected", 502)
        if "json" not in self.content_type and text[:1] not in "{[":
            kind = self.content_type.split(";")[0] or "text"
            raise FetchError(
                self.host, f"answered {kind}, not JSON (HTTP {self.status}): {_snippet(text)}", 502
            )
        try:
            return json.loads(text)
        except ValueError as exc:
            raise FetchError(self.host, f"a truncated or invalid JSON answer ({exc})", 502) from None


def _snippet(text: str, n: int = 80) -> str:
    flat = " ".join(text.split())
    return flat[:n] + ("..." if len(flat) > n else "")


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (a number or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.replace(".", "", 1).isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def backoff(attempt: int, rng: random.Random | None = None) -> float:
    """Seconds before retry number ``attempt`` (1, 2, ...): exponential, capped, with jitter (half
    to all of it), so many clients told 429 at once do not come back at once."""
    ceiling = min(MAX_DELAY, BASE_DELAY * 2 ** (attempt - 1))
    return ceiling * (0.5 + 0.5 * (rng or random).random())


@dataclass
class RateLimiter:
    """At most ``rate`` requests a second to one host: each request waits for its slot (the
    previous slot plus ``1 / rate``), so a steady run reaches the limit without passing it."""

    rate: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _next: float = 0.0

    def wait(self) -> float:
        """Wait for the next slot; returns the seconds waited."""
        now = self.clock()
        start = max(now, self._next)
        self._next = start + (1.0 / self.rate if self.rate > 0 else 0.0)
        if start > now:
            self.sleep(start - now)
        return start - now

    def hold(self, seconds: float) -> None:
        """Push the next slot back (a 429's ``Retry-After``)."""
        self._next = max(self._next, self.clock() + seconds)


@dataclass
class Cache:
    """Successful answers kept by request (method, URL, body) in ``folder``, one file each, read
    back while younger than ``max_age`` seconds: a re-run re-reads nothing it already has.
    ``max_age`` 0 reads nothing back (answers are still kept for the next run)."""

    folder: Path
    max_age: float

    def _path(self, key: str) -> Path:
        digest = hashlib.sha256(key.encode()).hexdigest()
        return self.folder / digest[:2] / f"{digest}.json"

    def get(self, key: str) -> Response | None:
        path = self._path(key)
        try:
            if self.max_age <= 0 or time.time() - path.stat().st_mtime > self.max_age:
                return None
            kept = json.loads(path.read_text(encoding="utf-8"))
            return Response(kept["url"], 200, kept["body"].encode(), kept["content_type"], cached=True)
        except (OSError, ValueError, KeyError):
            return None  # a damaged entry is asked for again

    def prune(self) -> int:
        """Remove kept answers older than ``max_age`` (and leftovers of interrupted writes): they
        would never be read back, and a cache of a big field grows by gigabytes. ``max_age`` 0
        (ask again) prunes nothing: those answers still serve a later run with an age limit.
        Returns how many files went."""
        if self.max_age <= 0 or not self.folder.is_dir():
            return 0
        cutoff, removed = time.time() - self.max_age, 0
        for path in self.folder.glob("*/*"):
            try:
                if path.stat().st_mtime < cutoff or path.name.endswith(".tmp"):
                    path.unlink()
                    removed += 1
            except OSError:
                continue  # another run removed or is writing it
        return removed

    def put(self, key: str, response: Response) -> None:
        path = self._path(key)
        kept = {"url": response.url, "content_type": response.content_type}
        kept["body"] = response.body.decode("utf-8", errors="replace")
        tmp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(kept), encoding="utf-8")
            tmp.replace(path)  # whole or absent, even when killed mid-write
        except OSError:
            pass  # a full disk costs the cache, not the fetch


@dataclass
class Stats:
    """What a run cost: requests sent, answers read from the cache, retries, seconds waited."""

    sent: int = 0
    cached: int = 0
    retries: int = 0
    waited: float = 0.0


@dataclass
class Client:
    """The one client of a fetch. ``rates`` and ``headers`` are per host (``api.semanticscholar.org``:
    1 request a second without a key, the key in ``x-api-key``); a host without a rate gets
    ``default_rate``. ``sleep``, ``clock`` and ``session`` are for tests."""

    rates: dict[str, float] = field(default_factory=dict)
    headers: dict[str, dict[str, str]] = field(default_factory=dict)
    cache: Cache | None = None
    default_rate: float = 1.0
    timeout: tuple[float, float] = TIMEOUT
    max_tries: int = MAX_TRIES
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    on_wait: Callable[[str], None] | None = None
    session: Any = None
    stats: Stats = field(default_factory=Stats)
    _limits: dict[str, RateLimiter] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.session is None:
            import requests

            self.session = requests.Session()
            self.session.headers["User-Agent"] = USER_AGENT

    def get(self, url: str, params: dict[str, Any] | None = None) -> Response:
        return self.request("GET", full_url(url, params))

    def post(self, url: str, params: dict[str, Any] | None, body: Any) -> Response:
        return self.request("POST", full_url(url, params), json.dumps(body, separators=(",", ":")))

    def request(self, method: str, url: str, body: str | None = None) -> Response:
        """One answer with status < 400 (from the cache when young enough), after retries;
        raises :class:`FetchError` otherwise, with the API's own message where it sends one."""
        key = f"{method} {url} {body or ''}"
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            self.stats.cached += 1
            return hit
        response = self._with_retries(method, url, body)
        if response.status >= 400:
            raise http_error(response)
        if self.cache is not None:
            self.cache.put(key, response)
        return response

    def _with_retries(self, method: str, url: str, body: str | None) -> Response:
        host = urlsplit(url).netloc
        limiter = self._limits.setdefault(
            host, RateLimiter(self.rates.get(host, self.default_rate), self.clock, self.sleep)
        )
        for attempt in range(1, self.max_tries + 1):
            self.stats.waited += limiter.wait()
            try:
                response = self._send(method, url, body, host)
            except FetchError:
                if attempt >= min(self.max_tries, NETWORK_TRIES):
                    raise
                response = None
            if response is not None and response.status not in RETRY_STATUSES:
                return response
            if attempt == self.max_tries:
                break
            delay = backoff(attempt)
            if (
                response is not None
                and (asked := retry_after(response.headers.get("retry-after"))) is not None
            ):
                delay = min(max(asked, 0.0), 10 * MAX_DELAY)
            self._retry_note(host, response, delay)
            limiter.hold(delay)
        assert response is not None
        return response

    def _retry_note(self, host: str, response: Response | None, delay: float) -> None:
        self.stats.retries += 1
        if self.on_wait is not None:
            what = f"HTTP {response.status}" if response is not None else "no answer"
            self.on_wait(f"{host}: {what}, retrying in {delay:.0f} s")

    def _send(self, method: str, url: str, body: str | None, host: str) -> Response:
        import requests

        headers = dict(self.headers.get(host, {}))
        if body is not None:
            headers["Content-Type"] = "application/json"
        self.stats.sent += 1
        try:
            r = self.session.request(method, url, data=body, headers=headers, timeout=self.timeout)
            content = r.content
        except requests.exceptions.ProxyError as exc:
            raise FetchError(host, f"the proxy refused the connection ({_reason(exc)})") from None
        except requests.exceptions.SSLError as exc:
            raise FetchError(host, f"a TLS error ({_reason(exc)})") from None
        except requests.exceptions.Timeout:
            raise FetchError(host, f"no answer within {self.timeout[1]:.0f} s") from None
        except requests.exceptions.RequestException as exc:  # refused, DNS, reset, truncated body
            raise FetchError(host, _reason(exc)) from None
        headers = {k.lower(): v for k, v in r.headers.items()}
        return Response(url, r.status_code, content, headers.get("content-type", ""), headers=headers)


def _reason(exc: BaseException) -> str:
    """The innermost useful words of a requests/urllib3 error (``Name or service not known``)."""
    text = str(exc)
    for marker in ("Failed to resolve", "NameResolutionError", "Connection refused", "timed out"):
        if marker in text:
            return {"NameResolutionError": "Failed to resolve the host name (no network?)"}.get(
                marker, marker
            )
    return _snippet(text, 160) or type(exc).__name__


def full_url(url: str, params: dict[str, Any] | None) -> str:
    """``url`` with ``params`` (those not None) as its query, in their order, commas kept as is
    (the APIs read ``fields=a,b`` either way; the cache key must not depend on spelling)."""
    if not params:
        return url
    query = urlencode({k: v for k, v in params.items() if v is not None}, safe=",:|*")
    return f"{url}{'&' if '?' in url else '?'}{query}" if query else url


def http_error(response: Response) -> FetchError:
    """An error status as one line: the API's own message (S2 ``error``/``message``, OpenAlex
    ``message``/``error``), what a 401/403 means, or the start of an HTML page."""
    host, status = response.host, response.status
    text = response.body.decode("utf-8", errors="replace").strip()
    message = ""
    try:
        obj = json.loads(text) if text[:1] in "{[" else None
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        said = [str(obj.get(k) or "").strip() for k in ("error", "message")]
        message = _snippet(": ".join(dict.fromkeys(x for x in said if x)), 200)  # OpenAlex sends both
    elif text:
        message = f"{(response.content_type.split(';')[0] or 'text')} answer: {_snippet(text)}"
    if status in (401, 403):
        return FetchError(
            host, f"HTTP {status}, the API key was refused ({message or 'forbidden'}); check it", status
        )
    return FetchError(host, f"HTTP {status}{': ' + message if message else ''}", status)
