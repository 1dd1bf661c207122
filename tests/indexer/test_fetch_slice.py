"""A slice of the literature: Semantic Scholar's bulk search paged by token on its recorded answers
(to the ``"token": null`` page, resumed from the stored token, a larger ``--limit`` going on where
the smaller one cut a page), and ``--field`` / ``--venue`` names resolved against the simulated
OpenAlex (the recordings hold no ``/sources`` or ``/fields`` answer): an exact name is taken and
said with the alternatives, an ambiguous one refused with its candidates, an unknown one refused."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from citewise.indexer.fetch import state
from citewise.indexer.fetch.http import Client, FetchError
from citewise.indexer.fetch.names import NameError_, field_by_id, resolve_field, resolve_venue, source_by_id
from citewise.indexer.fetch.openalex import OpenAlex
from citewise.indexer.fetch.plan import Fetcher
from citewise.indexer.fetch.s2 import S2
from citewise.indexer.store import Store
from tests.fetch_replay import API_SAMPLES, ReplayServer, simulator_module

BULK = API_SAMPLES / "s2-graph" / "responses" / "paper_search_bulk_q-kubernetes_{}.json"
PAGES = ("offset0_limit100", "token-p2_offset100_limit100", "token-p3_offset100_limit100")


def _s2(server: ReplayServer) -> S2:
    # The recordings asked fields=title: the fetch asks the same so the replay answers it.
    return S2(Client(default_rate=0, sleep=lambda s: None), f"{server.url}/graph/v1", bulk_fields="title")


def _recorded_ids() -> list[str]:
    return [
        p["paperId"] for page in PAGES for p in json.loads(Path(str(BULK).format(page)).read_text())["data"]
    ]


def _tokens(server: ReplayServer) -> list[str]:
    return [parse_qs(urlsplit(p).query).get("token", [""])[0][:8] for _m, p, _b in server.requests]


@pytest.fixture
def server():
    with ReplayServer("s2-graph") as s:
        yield s


def test_bulk_search_pages_by_token_to_the_last_page(server: ReplayServer, tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    fetcher = Fetcher(store, _s2(server), limit=10_000)
    fetcher.bulk("kubernetes")
    assert not server.misses and len(server.requests) == 3  # 1,000 + 1,000 + 674, then "token": null
    task = state.load(store, "s2bulk:")["s2bulk:kubernetes|"]
    assert task.done and task.items == 2674 and fetcher.totals.listed == 2674
    stored = {r for (r,) in store.conn.execute("SELECT ref FROM paper_ids WHERE ref LIKE 's2:%'")}
    assert stored == {f"s2:{i}" for i in _recorded_ids()}  # every paper once, by its S2 id
    fetcher.bulk("kubernetes")
    assert len(server.requests) == 3  # finished: nothing asked again


def test_bulk_search_resumes_and_a_larger_limit_goes_on_where_the_page_was_cut(
    server: ReplayServer, tmp_path: Path
) -> None:
    store = Store(tmp_path / "s.db")
    Fetcher(store, _s2(server), limit=1000).bulk("kubernetes")
    first = state.load(store, "s2bulk:")["s2bulk:kubernetes|"]
    assert first.done and first.items == 1000 and first.cursor.startswith("PCOKWVSK")  # the next page's token
    Fetcher(store, _s2(server), limit=1500).bulk("kubernetes")  # half of page 2, then cut
    cut = state.load(store, "s2bulk:")["s2bulk:kubernetes|"]
    assert cut.items == 1500 and cut.result == "skip:500" and cut.cursor == first.cursor
    Fetcher(store, _s2(server), limit=10_000).bulk("kubernetes")  # page 2 again from 500, page 3
    assert _tokens(server) == ["", "PCOKWVSK", "PCOKWVSK", "PCOA3RZL"]
    whole = tmp_path / "whole.db"
    with ReplayServer("s2-graph") as again:
        Fetcher(Store(whole), _s2(again), limit=10_000).bulk("kubernetes")
    refs = "SELECT ref FROM paper_ids ORDER BY ref"
    assert store.conn.execute(refs).fetchall() == Store(whole).conn.execute(refs).fetchall()
    assert state.load(store, "s2bulk:")["s2bulk:kubernetes|"].items == 2674


def test_bulk_search_that_matches_nothing_leaves_no_state(tmp_path: Path) -> None:
    empty = {"total": 0, "token": None, "data": []}
    answer = {
        ("GET", "/graph/v1/paper/search/bulk"): lambda q, b: (
            200,
            "application/json",
            json.dumps(empty).encode(),
            {},
        )
    }
    with ReplayServer("s2-graph", answer) as s:
        store = Store(tmp_path / "s.db")
        fetcher = Fetcher(store, _s2(s), limit=100)
        fetcher.bulk("n0 r3sult s3arch t3rm")
        assert fetcher.totals.listed == 0 and fetcher.totals.pages == 0 and state.load(store) == {}


def test_an_html_answer_is_one_line_and_stores_nothing(tmp_path: Path) -> None:
    html = b"<!DOCTYPE html><html><body>Please sign in to the proxy</body></html>"
    answer = {("GET", "/graph/v1/paper/search/bulk"): lambda q, b: (200, "text/html", html, {})}
    with ReplayServer("s2-graph", answer) as s:
        store = Store(tmp_path / "s.db")
        with pytest.raises(FetchError, match=r"answered text/html, not JSON .*Please sign in"):
            Fetcher(store, _s2(s), limit=100).bulk("kubernetes")
        assert store.count() == 0 and state.load(store) == {}


# -- names, on the simulated OpenAlex ---------------------------------------------------------------
@pytest.fixture(scope="module")
def sim():
    mod = simulator_module()
    with mod.Simulator(mod.SimConfig()) as server:
        yield server


def _oa(url: str) -> OpenAlex:
    return OpenAlex(Client(default_rate=0, sleep=lambda s: None), url)


def test_a_venue_named_exactly_is_chosen_and_the_others_are_said(sim) -> None:
    choice = resolve_venue(_oa(sim.url), "computational linguistics")  # case aside
    assert choice.entity.name == "Computational Linguistics" and choice.entity.kind == "source"
    assert choice.entity.filter == f"primary_location.source.id:{choice.entity.id}"
    assert len(choice.others) > 5  # the proceedings whose names hold the words
    note = choice.note("venue", "computational linguistics")
    assert "the one named exactly that" in note and f"= --venue {choice.others[0].id}" in note


def test_an_ambiguous_or_unknown_name_is_refused_with_the_candidates(sim) -> None:
    with pytest.raises(NameError_) as err:
        resolve_venue(_oa(sim.url), "Language Resources and Evaluation")
    text = str(err.value)
    assert "is ambiguous" in text and "LREC" in text and "= --venue S" in text and "\n" not in text
    with pytest.raises(NameError_, match="ambiguous: 2 match.*subfields/1203.*subfields/3310"):
        resolve_field(_oa(sim.url), "linguistics")
    with pytest.raises(NameError_, match="no OpenAlex field, subfield or topic has that name"):
        resolve_field(_oa(sim.url), "underwater basket weaving")


def test_a_field_by_name_or_id_and_its_works_are_listed(sim, tmp_path: Path) -> None:
    oa = _oa(sim.url)
    choice = resolve_field(oa, "Computer Science")
    assert (choice.entity.kind, choice.entity.id, choice.entity.filter) == (
        "field",
        "17",
        "primary_topic.field.id:17",
    )
    assert field_by_id("subfields/1702").filter == "primary_topic.subfield.id:1702"
    assert (
        field_by_id("T10181").filter == "primary_topic.id:T10181" and field_by_id("Computer Science") is None
    )
    assert source_by_id("s123").filter == "primary_location.source.id:S123"
    store = Store(tmp_path / "s.db")
    filt = f"{choice.entity.filter},publication_year:2004"
    Fetcher(store, S2(Client()), oa, limit=150).query(filt)
    assert state.load(store, "openalex:")[f"openalex:{filt}"].items == 150
    years = {y for (y,) in store.conn.execute("SELECT year FROM papers")}
    assert years == {2004}
