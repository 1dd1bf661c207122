"""One polite HTTP client for the scholarly APIs: timeouts, a per-host rate limit, exponential
back-off with jitter on 429 and 5xx (honouring ``Retry-After``), and a response cache by URL.

Why ``requests`` and a hand-written back-off rather than a retry library: ``requests`` is pure
Python, well kept, reads the proxy settings of the environment (``HTTPS_PROXY``: institutional
proxies) and tells a proxy error from a refused connection; the back-off is twenty lines, and
keeping it here lets the rate limiter, the cache and the progress report see every wait
(``urllib3.Retry`` sleeps out of sight, and tenacity or stamina would add a dependency for the
same twenty lines). The client is synchronous for its callers, with one exception that the rate
limit forces: at 10 requests a second the slot is 0.1 s, about what storing a page of 100 edges takes
the caller, so a caller that asks, then stores, then asks again falls behind the limit. The caller
therefore names the next request it will make (:meth:`Client.prefetch`) before storing a page, and
one worker thread sends it at its slot while the page is stored; :meth:`Client.request` then takes the
answer. Requests still go one at a time, in the order the caller names them, so the APIs (and the
faults of the simulator) see the same requests as before.

Errors: every failure the user must hear about is a :class:`FetchError` naming the host and what
went wrong in one line (``could not reach api.openalex.org: ...``); callers add what was kept.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from citewise.errors import CitewiseError

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_TRIES = 6
NETWORK_TRIES = 3  # no answer at all (refused, no route, DNS): give up sooner, the cause rarely passes
BASE_DELAY = 1.0  # seconds before the first retry (then 2, 4, 8... with jitter)
MAX_DELAY = 60.0
TIMEOUT = (10.0, 60.0)  # connect, read: a /citations page with contexts can take 30 s to build
USER_AGENT = "citewise (https://github.com/citewise/citewise; citewise fetch)"


class FetchError(CitewiseError):
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
    """At most ``rate`` requests a second to one API: each request waits for its slot (the
    previous request's send time plus ``1 / rate``, never the time its answer was processed), so
    a steady run reaches the limit without passing it. Slots are taken under a lock: the prefetch
    worker and the caller's thread may both ask."""

    rate: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _next: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def wait(self) -> float:
        """Wait for the next slot; returns the seconds waited. A sleep that overran (a loaded
        machine wakes late) pushes the next slot back by as much: two requests never go closer
        than ``1 / rate``, which a strict API would refuse with a 429 and a second's wait."""
        interval = 1.0 / self.rate if self.rate > 0 else 0.0
        with self._lock:
            now = self.clock()
            start = max(now, self._next)
            self._next = start + interval
        if start > now:
            self.sleep(start - now)
            with self._lock:
                self._next = max(self._next, self.clock() + interval)
        return start - now

    def hold(self, seconds: float) -> None:
        """Push the next slot back (a 429's ``Retry-After``)."""
        with self._lock:
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
class _Pending:
    """A request named in advance: the worker sends it at its slot, the caller takes the answer
    (or the error, raised again in the caller's thread)."""

    method: str
    url: str
    body: str | None
    done: threading.Event = field(default_factory=threading.Event)
    response: Response | None = None
    error: BaseException | None = None


@dataclass
class Client:
    """The one client of a fetch. ``rates`` are per API, keyed by host (``api.semanticscholar.org``:
    1 request a second without a key) or by base URL (two APIs behind one proxy host keep a bucket
    each); ``headers`` per host (the key in ``x-api-key``); an API without a rate gets
    ``default_rate``. ``ahead`` is how many named requests (:meth:`prefetch`) may wait answered or
    in flight: memory stays bounded. ``sleep``, ``clock`` and ``session`` are for tests."""

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
    ahead: int = 4
    _limits: dict[str, RateLimiter] = field(default_factory=dict)
    _pending: dict[str, _Pending] = field(default_factory=dict)
    _queue: queue.SimpleQueue | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.session is None:
            import requests

            self.session = requests.Session()
            self.session.headers["User-Agent"] = USER_AGENT

    def get(self, url: str, params: dict[str, Any] | None = None) -> Response:
        return self.request("GET", full_url(url, params))

    def post(self, url: str, params: dict[str, Any] | None, body: Any) -> Response:
        return self.request("POST", full_url(url, params), json.dumps(body, separators=(",", ":")))

    def prefetch(self, url: str, params: dict[str, Any] | None = None) -> bool:
        """Name the GET the caller will make soon: the worker thread sends it at its slot while the
        caller stores what it has. False (nothing sent) when it is cached, already named, or
        ``ahead`` named requests are waiting to be taken."""
        url = full_url(url, params)
        key = f"GET {url} "
        with self._lock:
            if key in self._pending or len(self._pending) >= self.ahead:
                return False
            if self.cache is not None and self.cache.get(key) is not None:
                return False
            pending = self._pending[key] = _Pending("GET", url, None)
            if self._queue is None:
                self._queue = queue.SimpleQueue()
                threading.Thread(target=self._work, name="citewise-fetch", daemon=True).start()
        self._queue.put(pending)
        return True

    def _work(self) -> None:
        """The worker: named requests, one at a time, in the order they were named. A daemon
        thread: Ctrl-C or an error in the caller ends the process without waiting for it."""
        assert self._queue is not None
        while True:
            pending = self._queue.get()
            try:
                pending.response = self._answer(pending.method, pending.url, pending.body)
            except BaseException as exc:  # noqa: BLE001 - FetchError, Stopped: the caller raises it
                pending.error = exc
            pending.done.set()

    def request(self, method: str, url: str, body: str | None = None) -> Response:
        """One answer with status < 400 (from the cache when young enough, or named in advance),
        after retries; raises :class:`FetchError` otherwise, with the API's own message."""
        with self._lock:
            pending = self._pending.pop(f"{method} {url} {body or ''}", None)
        if pending is None:
            return self._answer(method, url, body)
        pending.done.wait()
        if pending.error is not None:
            raise pending.error
        assert pending.response is not None
        return pending.response

    def _answer(self, method: str, url: str, body: str | None) -> Response:
        key = f"{method} {url} {body or ''}"
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            self._count("cached", 1)
            return hit
        response = self._with_retries(method, url, body)
        if response.status >= 400:
            raise http_error(response)
        if self.cache is not None:
            self.cache.put(key, response)
        return response

    def _count(self, name: str, amount: float) -> None:
        """Add to one of :attr:`stats` (under the lock: the worker and the caller both count)."""
        with self._lock:
            setattr(self.stats, name, getattr(self.stats, name) + amount)

    def limiter(self, url: str) -> RateLimiter:
        """The bucket of the API ``url`` belongs to: the longest base-URL key of ``rates`` that
        starts it, else its host's."""
        prefixes = [k for k in self.rates if "://" in k and url.startswith(k)]
        key = max(prefixes, key=len) if prefixes else urlsplit(url).netloc
        with self._lock:
            if key not in self._limits:
                self._limits[key] = RateLimiter(
                    self.rates.get(key, self.default_rate), self.clock, self.sleep
                )
            return self._limits[key]

    def _with_retries(self, method: str, url: str, body: str | None) -> Response:
        host = urlsplit(url).netloc
        limiter = self.limiter(url)
        for attempt in range(1, self.max_tries + 1):
            self._count("waited", limiter.wait())
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
        self._count("retries", 1)
        if self.on_wait is not None:
            what = f"HTTP {response.status}" if response is not None else "no answer"
            self.on_wait(f"{host}: {what}, retrying in {delay:.0f} s")

    def _send(self, method: str, url: str, body: str | None, host: str) -> Response:
        import requests

        headers = dict(self.headers.get(host, {}))
        if body is not None:
            headers["Content-Type"] = "application/json"
        self._count("sent", 1)
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
