"""``citewise fetch``'s Semantic Scholar side against real recorded answers, replayed on a
loopback server (tests/fetch_replay.py): the batch with unknown ids, references with citing
sentences and intents, paging to the last page, retries, and the API's errors in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewise.indexer.fetch import state
from citewise.indexer.fetch.http import Client, FetchError
from citewise.indexer.fetch.plan import Fetcher
from citewise.indexer.fetch.s2 import PAPER_FIELDS, S2, api_id
from citewise.indexer.sources.s2ag import api_items
from citewise.indexer.store import Store
from tests.fetch_replay import BATCH_DOIS, S2_RESPONSES, ReplayServer, batch_by_doi, recorded_pages

NULLS_FIELDS = PAPER_FIELDS.replace("citationCount,", "citationCount,citationStyles,")
NULLS_IDS = [
    "CorpusId:211530585",
    "CorpusId:470667",
    "10.2139/ssrn.2250500",
    "0f40b1f08821e22e859c6050916cec3667778613",
]


@pytest.fixture(scope="module")
def server():
    with ReplayServer("s2-graph") as s:
        yield s


def _client(sleeps: list[float] | None = None) -> Client:
    return Client(default_rate=0, sleep=(sleeps.append if sleeps is not None else lambda s: None))


def _s2(server: ReplayServer, **kw) -> S2:
    return S2(_client(), server.url + "/graph/v1", **kw)


def _edges(store: Store) -> list[tuple]:
    return store.conn.execute(
        "SELECT citing_ref, cited_ref, context, intents, influential FROM citation_edges ORDER BY rowid"
    ).fetchall()


def test_batch_with_unknown_ids_gives_none_and_papers_merge_by_id(
    server: ReplayServer, tmp_path: Path
) -> None:
    papers = _s2(server, paper_fields=NULLS_FIELDS).batch(NULLS_IDS)
    assert papers[0] is None and all(p is not None for p in papers[1:])
    store = Store(tmp_path / "s.db")
    state.write_page(store, state.S2_SOURCE, state.S2_FORMAT, api_items(papers[1:], "", "x"), [])
    assert store.count() == 3
    row = store.conn.execute("SELECT paper_id FROM paper_ids WHERE ref='corpusid:470667'").fetchone()
    assert row and store.get(row[0]).doi == "10.2139/ssrn.288970"


def test_api_ids() -> None:
    assert api_id("corpusid:12") == "CorpusId:12" and api_id("arxiv:1706.03762") == "ARXIV:1706.03762"
    assert api_id("10.1/x:y") == "10.1/x:y" and api_id("s2:" + "a" * 40) == "a" * 40


def test_references_with_contexts_and_intents_land_as_citing_sentences(
    server: ReplayServer, tmp_path: Path
) -> None:
    store = Store(tmp_path / "s.db")
    fetcher = Fetcher(store, _s2(server), limit=1000)
    fetcher.expand(["corpusid:1033682"], directions=("references",))
    task = state.load(store, "s2:")["s2:references:corpusid:1033682"]
    assert task.done and task.items == 156 and fetcher.totals.pages == 2
    edges = _edges(store)
    with_context = [e for e in edges if e[2]]
    assert with_context and all(e[0] == "corpusid:1033682" for e in edges)
    assert any(e[3] for e in with_context), "intents kept with their sentences"
    assert len({e[1] for e in with_context}) == 36  # the references S2 gives sentences for
    # A re-run asks nothing and adds nothing; with the state forgotten, it adds nothing either.
    asked = len(server.requests)
    fetcher.expand(["corpusid:1033682"], directions=("references",))
    assert len(server.requests) == asked
    before = (store.count(), len(edges))
    with store._transaction() as conn:
        conn.execute("DELETE FROM fetch_state")
    Fetcher(store, _s2(server), limit=1000).expand(["corpusid:1033682"], directions=("references",))
    assert (store.count(), len(_edges(store))) == before


def test_citations_page_to_the_last_page(server: ReplayServer, tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    fetcher = Fetcher(store, _s2(server, edge_fields="title"), limit=5000)
    fetcher.expand(["corpusid:14514057"], directions=("citations",))
    task = state.load(store, "s2:")["s2:citations:corpusid:14514057"]
    assert task.done and fetcher.totals.pages == 19 and task.items == 1881
    assert not server.misses
    edges = _edges(store)
    assert {e[1] for e in edges} == {"corpusid:14514057"}
    assert len(edges) == len({e[0] for e in edges}) > 1800  # one edge a citing paper (pages repeat a few)
    assert store.count() > 1800


def test_limit_stops_paging(server: ReplayServer, tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    fetcher = Fetcher(store, _s2(server, edge_fields="title"), limit=300)
    fetcher.expand(["corpusid:14514057"], directions=("citations",))
    assert fetcher.totals.pages == 3 and state.load(store, "s2:")["s2:citations:corpusid:14514057"].done


def test_429_twice_then_200(server: ReplayServer) -> None:
    sleeps: list[float] = []
    client = _client(sleeps)
    url = f"{server.url}/graph/v1/paper/search"
    fields = NULLS_FIELDS
    response = client.get(url, {"query": "turing", "fields": fields, "offset": 0, "limit": 100})
    assert response.status == 200 and response.json()["data"]
    assert client.stats.retries == 2 and client.stats.sent == 3
    assert len([s for s in sleeps if s > 0]) == 2 and 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0


def test_errors_in_one_line(server: ReplayServer) -> None:
    client = _client()
    with pytest.raises(FetchError) as err:
        client.get(f"{server.url}/graph/v1/paper/0", {"fields": "t,i,t,l,e"})
    assert err.value.status == 404 and "Paper with id 0 not found" in str(err.value)
    with pytest.raises(FetchError) as err:
        client.get(f"{server.url}/graph/v1/paper/10.1093/mind/lix.236.433", {"fields": "unknown"})
    assert err.value.status == 400 and str(err.value).endswith(
        "HTTP 400: Unrecognized or unsupported fields: [unknown]"
    )
    with pytest.raises(FetchError) as err:
        _s2(server, paper_fields=NULLS_FIELDS).batch(NULLS_IDS[1:])
    assert err.value.status == 403 and "API key was refused (Forbidden)" in str(err.value)


def test_title_match_only_when_the_same_title(server: ReplayServer, tmp_path: Path) -> None:
    from citewise.indexer.fetch.library import Seed

    fields = "authors,citationCount,citationStyles,externalIds,influentialCitationCount,isOpenAccess,journal,openAccessPdf,publicationDate,publicationTypes,title,url,venue,year"
    store = Store(tmp_path / "s.db")
    title = "Effect of native oxide layers on copper thin-film tensile properties: A reactive molecular dynamics study"
    seeds = [Seed([], title, None)]
    seeds += [
        Seed([], "Two Library Papers Share This Title", 2001),
        Seed([], "Two library papers share this title", 2003),
    ]
    fetcher = Fetcher(store, _s2(server, paper_fields=fields))
    refs = fetcher.resolve(seeds)
    assert len(refs) == 1 and store.count() == 1
    assert (fetcher.totals.resolved, fetcher.totals.ambiguous) == (1, 2)
    # No match: a 404 "Title match not found", or an empty data list.
    assert _s2(server, paper_fields=fields).match("abs12032jsdafn") is None
    assert _s2(server, paper_fields=fields).match("empty results edge case query") is None


def test_a_400_on_a_list_page_is_an_error_for_that_list_not_its_end(tmp_path: Path) -> None:
    """The second page of a citations list refused with S2's recorded 400 (from a search paged
    too far: the recordings hold no refused list page): the list stays at that offset, noted,
    and the next run asks that page again and finishes it."""
    refused = (
        S2_RESPONSES / "paper_search_q-sublinear-near-optimal-edit-distance_offset100_limit100_400.json"
    ).read_bytes()
    pages = recorded_pages("paper_CorpusID-14514057_citations_offset{offset}_limit100.json")
    refusals = [1]

    def citations(query: str, body: str) -> tuple:
        if "offset=100" in query and refusals:
            refusals.pop()
            return 400, "application/json", refused, {}
        return pages(query, body)

    with ReplayServer("s2-graph", {("GET", "*/citations"): citations}) as server:
        store = Store(tmp_path / "s.db")
        fetcher = Fetcher(store, _s2(server, edge_fields="title"), limit=300)
        fetcher.expand(["corpusid:14514057"], directions=("citations",))
        task = state.load(store, "s2:")["s2:citations:corpusid:14514057"]
        assert not task.done and task.cursor == "100" and task.items == 100
        assert "HTTP 400" in fetcher.totals.problems[0]
        again = Fetcher(store, _s2(server, edge_fields="title"), limit=300)
        again.expand(["corpusid:14514057"], directions=("citations",))
        task = state.load(store, "s2:")["s2:citations:corpusid:14514057"]
        assert task.done and task.items == 300 and again.totals.pages == 2 and not again.totals.problems


def test_papers_not_found_are_asked_again_only_with_retry_missing(tmp_path: Path) -> None:
    """A paper S2 did not know (``null`` in the batch) is asked again only with retry_missing."""
    from citewise.indexer.fetch.library import Seed

    known: set[str] = {BATCH_DOIS[0]}

    def batch(query: str, body: str) -> tuple:
        status, ctype, data, headers = batch_by_doi(query, body)
        papers = [p if p and p["externalIds"]["DOI"] in known else None for p in json.loads(data)]
        return status, ctype, json.dumps(papers).encode(), headers

    with ReplayServer("s2-graph", {("POST", "*/batch"): batch}) as server:
        store = Store(tmp_path / "s.db")
        seeds = [Seed([doi], f"Paper {doi}") for doi in BATCH_DOIS]
        first = Fetcher(store, _s2(server))
        assert first.resolve(seeds) == ["corpusid:470667"] and first.totals.not_found == 2
        known.add(BATCH_DOIS[1])  # S2 knows one more paper now
        asked = len(server.requests)
        assert Fetcher(store, _s2(server)).resolve(seeds) == ["corpusid:470667"]
        assert len(server.requests) == asked  # by default: asked once, remembered as not found
        retry = Fetcher(store, _s2(server), retry_missing=True)
        assert retry.resolve(seeds) == ["corpusid:470667", "corpusid:3142471"]
        assert json.loads(server.requests[-1][2])["ids"] == BATCH_DOIS[1:]  # only the missing ones
        assert retry.totals.not_found == 1


def test_cache_prune_removes_answers_older_than_the_age_limit(tmp_path: Path) -> None:
    import os
    import time

    from citewise.indexer.fetch.http import Cache, Response

    cache = Cache(tmp_path / "cache", max_age=86400)
    for key in ("old", "young"):
        cache.put(key, Response(f"http://x/{key}", 200, b"{}", "application/json"))
    old = cache._path("old")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    (old.parent / "left.json.tmp").write_text("")  # an interrupted write
    assert cache.prune() == 2 and not old.exists() and cache.get("young") is not None
    assert Cache(tmp_path / "cache", max_age=0).prune() == 0 and cache._path("young").exists()


def test_two_seeds_citing_each_other_give_one_row_a_pair_without_a_sentence(tmp_path: Path) -> None:
    """A pair met in both seeds' lists (A's references and B's citations). The recordings hold
    no two papers citing each other, so the edges are written as the pages would give them."""
    from citewise.indexer.citations import CitationEdge

    store = Store(tmp_path / "s.db")
    a, b, c, d = "corpusid:1", "corpusid:2", "corpusid:3", "corpusid:4"
    pages = [
        [CitationEdge(a, b, "", 1)],  # A's references: B, no sentence
        [CitationEdge(a, b, "", 7)],  # B's citations: A, no sentence again
        [CitationEdge(c, d, "As shown by D.", 1, "result")],  # C's references: D with its sentence
        [CitationEdge(c, d, "", 3)],  # D's citations: C, the sentence not given on this side
        [CitationEdge(a, b, "Following B.", 2, "methodology")],  # a later page gives A -> B a sentence
    ]
    added = [state.write_page(store, state.S2_SOURCE, state.S2_FORMAT, page, []).edges for page in pages]
    assert added == [1, 0, 1, 0, 1]
    assert sorted(e[:3] for e in _edges(store)) == [(a, b, "Following B."), (c, d, "As shown by D.")]
