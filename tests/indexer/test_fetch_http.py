"""The fetch client's pacing and its requests named in advance (``indexer/fetch/http.py``).

Why: at 10 requests a second a slot is 0.1 s, about what storing a page takes, so the client sends
the next page while the caller stores the last one; these tests pin what that must not change (the
requests sent, the store written, errors reaching the caller) and what the pacing guarantees (no
two requests closer than a slot, one bucket per API even behind one host).
"""

from __future__ import annotations

from pathlib import Path

from citewise.indexer.fetch.http import Client, FetchError, RateLimiter
from citewise.indexer.fetch.plan import Fetcher
from citewise.indexer.fetch.s2 import S2
from citewise.indexer.store import Store
from tests.fetch_replay import around_servers

REFS = ["corpusid:1", "corpusid:2", "corpusid:3"]


def test_a_late_wake_pushes_the_next_slot_back() -> None:
    """A sleep that overran 50 ms (a loaded machine) must not let the next request go early."""
    now = [0.0]
    sends: list[float] = []

    def sleep(seconds: float) -> None:
        now[0] += seconds + 0.05

    limiter = RateLimiter(10.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        limiter.wait()
        sends.append(now[0])
    gaps = [b - a for a, b in zip(sends, sends[1:], strict=False)]
    assert min(gaps) >= 0.1 - 1e-9, gaps


def test_a_punctual_limiter_keeps_the_send_grid() -> None:
    """Processing between requests does not delay the next slot (it counts from the last send)."""
    now = [0.0]
    limiter = RateLimiter(10.0, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    limiter.wait()
    now[0] += 0.06  # the caller stores the page
    assert abs(limiter.wait() - 0.04) < 1e-9


def test_two_apis_behind_one_host_keep_a_bucket_each() -> None:
    base = "http://proxy.example:8080"
    client = Client(rates={f"{base}/s2": 1.0, f"{base}/openalex": 10.0}, default_rate=5.0, session=object())
    s2, oa = client.limiter(f"{base}/s2/paper/x"), client.limiter(f"{base}/openalex/works?x=1")
    assert s2 is not oa and (s2.rate, oa.rate) == (1.0, 10.0)
    assert client.limiter(f"{base}/crossref/works").rate == 5.0  # the host's bucket, the default rate
    host = Client(rates={"api.example": 2.0}, session=object())
    assert host.limiter("https://api.example/a") is host.limiter("https://api.example/b")


def _expand(tmp_path: Path, name: str, ahead: int) -> tuple[list, list, list[str]]:
    s2_server, oa_server = around_servers(delay=0.01)
    with s2_server:
        client = Client(default_rate=0, sleep=lambda s: None, ahead=ahead)
        store = Store(tmp_path / f"{name}.db")
        fetcher = Fetcher(store, S2(client, s2_server.url + "/graph/v1"), limit=250)
        fetcher.expand(REFS)
        edges = store.conn.execute(
            "SELECT citing_ref, cited_ref, context, intents, influential FROM citation_edges"
        ).fetchall()
        papers = store.conn.execute("SELECT title, year FROM papers").fetchall()
        assert client.stats.sent == len(s2_server.requests)  # every request counted, none sent twice
        assert not client._pending  # every request named in advance was taken
        return sorted(edges, key=repr), sorted(papers, key=repr), sorted(r[1] for r in s2_server.requests)


def test_requests_named_in_advance_send_the_same_requests_and_store_the_same(tmp_path: Path) -> None:
    edges, papers, sent = _expand(tmp_path, "ahead", ahead=4)
    edges0, papers0, sent0 = _expand(tmp_path, "plain", ahead=0)
    assert sent == sent0 and len(sent) == len(REFS) * (
        2 + 3
    )  # recorded: 2 pages of references, 3 of citations
    assert edges == edges0 and papers == papers0 and edges


def test_an_error_of_a_request_named_in_advance_reaches_the_caller() -> None:
    s2_server, _ = around_servers()
    with s2_server:
        client = Client(default_rate=0, sleep=lambda s: None)
        url = f"{s2_server.url}/graph/v1/paper/unknown/references"
        assert client.prefetch(url, {"offset": 5000, "limit": 100})  # no such recorded page: 404
        assert not client.prefetch(url, {"offset": 5000, "limit": 100})  # named once
        try:
            client.get(url, {"offset": 5000, "limit": 100})
        except FetchError as exc:
            assert exc.status == 404
        else:
            raise AssertionError("the 404 of a prefetched request was lost")
        assert client.stats.sent == 1
