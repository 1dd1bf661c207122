"""``citewise fetch``'s OpenAlex side on recorded answers: cursor paging to the empty last page,
works landing through the OpenAlex importer, and a 404 whose body is HTML."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from citewise.indexer.fetch import state
from citewise.indexer.fetch.http import Client, FetchError, Response
from citewise.indexer.fetch.openalex import OpenAlex, topic_filter
from citewise.indexer.fetch.plan import Fetcher
from citewise.indexer.fetch.s2 import S2
from citewise.indexer.store import Store
from tests.fetch_replay import API_SAMPLES, ReplayServer

MAILTO = "rainer@krugs.de"  # the address the recordings were made with


@pytest.fixture(scope="module")
def server():
    with ReplayServer("openalex") as s:
        yield s


def _oa(server: ReplayServer) -> OpenAlex:
    return OpenAlex(Client(default_rate=0, sleep=lambda s: None), server.url, MAILTO)


def test_cursor_pages_land_as_works(server: ReplayServer, tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    fetcher = Fetcher(store, S2(Client()), _oa(server), limit=1000)
    fetcher.query("cited_by:W3046863325|W3045921891")
    name = "openalex:cited_by:W3046863325|W3045921891"
    task = state.load(store, "openalex:")[name]
    assert task.done and task.items == 38 and fetcher.totals.pages == 1  # a short page is the last
    assert store.count() >= 37  # two of the 38 works are one paper to the store (same title and DOI-less)
    assert state.counts(store, state.OPENALEX_SOURCE)["papers"] == store.count()
    asked = len(server.requests)
    fetcher.query("cited_by:W3046863325|W3045921891")  # done: nothing asked again
    assert len(server.requests) == asked


def test_html_404_is_no_work_and_html_is_never_json(server: ReplayServer) -> None:
    oa = _oa(server)
    assert oa.work("https://doi.org/10.1046/j.1365-2699.2003.00795", select="open_access,doi") is None
    assert oa.work("https://doi.org/10.1021/acs.jctc.5b00178", select="open_access,doi")["doi"]
    page = Response(
        "https://api.openalex.org/works", 200, b"<!DOCTYPE html><html>Proxy login</html>", "text/html"
    )
    with pytest.raises(FetchError, match="api.openalex.org: answered text/html, not JSON"):
        page.json()
    with pytest.raises(FetchError, match="an empty answer"):
        Response("https://api.openalex.org/works", 200, b"", "application/json").json()


def test_bad_filter_message(server: ReplayServer) -> None:
    with pytest.raises(FetchError) as err:
        _oa(server).client.get(f"{server.url}/works", {"filter": "DOESNTEXIST:1"})
    assert err.value.status == 400 and "DOESNTEXIST" in str(err.value)


def test_topic_filter() -> None:
    assert topic_filter("dense retrieval", "2015-") == (
        "title_and_abstract.search:dense retrieval,from_publication_date:2015-01-01"
    )
    assert topic_filter("a, b", "2019").endswith(",publication_year:2019")
    with pytest.raises(ValueError):
        topic_filter("x", "last year")


def test_expired_cursor_lists_again_from_the_start_once(tmp_path: Path) -> None:
    """The recordings hold no expired cursor: the second page answers a 400 once (OpenAlex's
    error shape, as its recorded 400s), then the listing works again from ``*``."""
    responses = API_SAMPLES / "openalex" / "responses"
    start = (
        responses / "works_filter-openalex-W3045921891-W3046863325_perpage200_cursor-start.json"
    ).read_bytes()
    last = (
        responses / "works_filter-openalex-W3045921891-W3046863325_perpage200_cursor-p2_last-empty.json"
    ).read_bytes()
    expired = json.dumps(
        {"error": "Invalid query parameters error.", "message": "cursor is expired"}
    ).encode()
    refusals = [1]

    def works(query: str, body: str) -> tuple:
        if parse_qs(query)["cursor"] == ["*"]:
            return 200, "application/json", start, {}
        if refusals:
            refusals.pop()
            return 400, "application/json", expired, {}
        return 200, "application/json", last, {}

    with ReplayServer("openalex", {("GET", "/works"): works}) as server:
        store = Store(tmp_path / "s.db")
        oa = OpenAlex(Client(default_rate=0, sleep=lambda s: None), server.url, MAILTO, per_page=2)
        fetcher = Fetcher(store, S2(Client()), oa, limit=100)
        fetcher.query("openalex:W3045921891|W3046863325")
        cursors = [parse_qs(urlsplit(p).query)["cursor"][0] for _m, p, _b in server.requests]
        assert cursors[0] == "*" and cursors[2] == "*" and len(cursors) == 4  # the 400 once, then again
        task = state.load(store, "openalex:")["openalex:openalex:W3045921891|W3046863325"]
        assert task.done and task.items == 2 and store.count() == 2  # listed twice, stored once
        assert "cursor expired" in fetcher.totals.problems[0]
        with store._transaction() as conn:  # the listing anew, and its cursor expires twice:
            conn.execute("DELETE FROM fetch_state")  # the second 400 is an error, as any 400
        refusals.extend([1, 1])
        with pytest.raises(FetchError) as err:
            Fetcher(store, S2(Client()), oa, limit=100).query("openalex:W3045921891|W3046863325")
        assert err.value.status == 400 and "cursor is expired" in str(err.value)
