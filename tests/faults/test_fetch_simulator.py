"""The simulated scholarly APIs (``bench/fetch_simulator.py``) that ``citewise fetch`` is measured against.

Why test the simulator itself: the fetch figures (coverage, requests, robustness under faults,
speed at the rate limit) are only as good as the server they are measured on. So: its answers have
the keys of the real recorded responses, its paging ends, it never serves anything of the ACL dev
years (the honest split), its rate limiter answers 429 with Retry-After, and its faults are the
same on every run with the same seed. Loopback only; every loop is bounded.
"""

from __future__ import annotations

import csv
import http.client
import json
import socket
import sys
import time
from urllib.parse import quote_plus, urlsplit

import pytest

from ..conftest import REPO, SHARED_DATA, require
from ..fetch_replay import simulator_module

SAMPLES = SHARED_DATA / "samples" / "api"
CITATIONS = SHARED_DATA / "citations"


@pytest.fixture(scope="module")
def sim_mod():
    return simulator_module()


@pytest.fixture(scope="module")
def graph(sim_mod):
    """The ACL graph, parsed once (then cached under /tmp by the simulator itself)."""
    return sim_mod.load_graph(SHARED_DATA)


@pytest.fixture(scope="module")
def sim(sim_mod, graph):
    """A simulator without limits or faults, shared by the read-only tests."""
    with sim_mod.Simulator(sim_mod.SimConfig(data=SHARED_DATA), graph=graph) as server:
        yield server


def call(base: str, path: str, body: object = None, timeout: float = 20.0) -> tuple[int, dict, bytes | None]:
    """One request on a fresh connection: status, headers, and the body (None when cut short)."""
    url = urlsplit(base)
    assert url.hostname in ("127.0.0.1", "::1"), "tests talk to loopback only"
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request("POST" if data is not None else "GET", path, body=data)
        resp = conn.getresponse()
        try:
            payload: bytes | None = resp.read()
        except http.client.IncompleteRead:
            payload = None
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload
    finally:
        conn.close()


def get_json(base: str, path: str, body: object = None) -> object:
    status, _, payload = call(base, path, body)
    assert status == 200 and payload is not None, (status, payload)
    return json.loads(payload)


def recorded(api: str, name: str) -> tuple[str, object]:
    """A real recorded response: its query string (from ``requests.tsv``) and its body."""
    folder = require(SAMPLES / api)
    with open(folder / "requests.tsv", encoding="utf-8", newline="") as fh:
        rows = {row["file"]: row for row in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)}
    row = rows[f"responses/{name}"]
    query = row["path_query"].partition("?")[2]
    return query, json.loads((folder / "responses" / name).read_text(encoding="utf-8"))


def a_cited_paper_with_dev_citers(graph, sim_mod) -> str:
    """The (older) cited paper with the most ScisummNet sentences written by dev-year papers."""
    counts: dict[str, int] = {}
    for (citing, cited), sentences in graph.contexts.items():
        if (
            citing not in graph.papers
            or cited not in graph.papers
            or sim_mod.is_dev_paper(graph.papers[cited])
        ):
            continue
        if sim_mod.is_dev_paper(graph.papers[citing]):
            counts[cited] = counts.get(cited, 0) + len(sentences)
    return max(sorted(counts), key=counts.__getitem__)


# -- shapes -------------------------------------------------------------------------------------------
def test_s2_paper_and_batch_have_the_keys_of_real_responses(sim) -> None:
    query, real = recorded("s2-graph", "paper_DOI-10.1023_a-1007154515475.json")
    ours = get_json(sim.url, f"/graph/v1/paper/ACL:A00-1031?{query}")
    assert set(ours) == set(real)
    query, real_batch = recorded("s2-graph", "paper_batch_with_unknown_ids_nulls.json")
    ours_batch = get_json(sim.url, f"/graph/v1/paper/batch?{query}", {"ids": ["CorpusId:0", "ACL:A00-1031"]})
    assert ours_batch[0] is None and real_batch[0] is None
    real_entry = next(e for e in real_batch if e)
    assert set(ours_batch[1]) == set(real_entry)
    assert set(ours_batch[1]["externalIds"]) >= {"ACL", "CorpusId"}
    assert set(ours_batch[1]["authors"][0]) == set(real_entry["authors"][0])


def test_s2_references_with_contexts_have_the_keys_of_a_real_page(sim) -> None:
    query, real = recorded("s2-graph", "paper_CorpusID-1033682_references_offset0_limit100.json")
    citing = next(iter(sorted(sim.view.refs)))
    ours = get_json(sim.url, f"/graph/v1/paper/ACL:{citing}/references?{query}".replace("offset=0&", ""))
    assert set(real) == {"offset", "next", "data"}
    assert set(ours) <= set(real) and {"offset", "data"} <= set(ours)
    assert set(ours["data"][0]) == set(real["data"][0])
    assert set(ours["data"][0]["citedPaper"]) == set(real["data"][0]["citedPaper"])
    real_ctx = next(e for e in real["data"] if e["contexts"])["contextsWithIntent"][0]
    with_ctx = get_json(sim.url, f"/graph/v1/paper/ACL:A00-1031/citations?{query}")
    edge = next(e for e in with_ctx["data"] if e["contexts"])
    assert set(edge["contextsWithIntent"][0]) == set(real_ctx)
    assert isinstance(edge["intents"], list) and isinstance(edge["isInfluential"], bool)


def test_s2_citations_match_and_errors_have_the_keys_of_real_responses(sim) -> None:
    query, real = recorded("s2-graph", "paper_CorpusID-14514057_citations_offset0_limit100.json")
    ours = get_json(sim.url, f"/graph/v1/paper/ACL:A00-1031/citations?{query}")
    assert set(ours) == set(real) and set(ours["data"][0]) == set(real["data"][0]) == {"citingPaper"}
    assert set(ours["data"][0]["citingPaper"]) == set(real["data"][0]["citingPaper"])
    query, real = recorded("s2-graph", "paper_search_match_q-Effect-of-native-oxide-layers-on-cop.json")
    title = sim.view.graph.papers["A00-1031"].title
    fields = query.partition("fields=")[2]
    ours = get_json(sim.url, f"/graph/v1/paper/search/match?query={quote_plus(title)}&fields={fields}")
    assert set(ours["data"][0]) == set(real["data"][0])
    for path, name in (
        ("/graph/v1/paper/search/match?query=abs12032jsdafn", "paper_search_match_q-abs12032jsdafn_404.json"),
        ("/graph/v1/paper/0?fields=title", "paper_0_404.json"),
    ):
        status, _, payload = call(sim.url, path)
        assert status == 404 and set(json.loads(payload)) == set(recorded("s2-graph", name)[1])
    status, _, payload = call(sim.url, "/graph/v1/paper/ACL:A00-1031?fields=unknown")
    assert (
        status == 400
        and json.loads(payload) == recorded("s2-graph", "paper_10.1093_mind_lix.236.433_400.json")[1]
    )


def test_openalex_works_and_pages_have_the_keys_of_real_responses(sim) -> None:
    _, real_work = recorded("openalex", "works_doi-10.1023-a-1007154515475.json")
    paper = sim.view.graph.papers["A00-1031"]
    ours = get_json(sim.url, f"/works/https://doi.org/{paper.doi}")
    assert set(ours) == set(real_work)
    assert set(ours["ids"]) <= set(real_work["ids"]) and ours["doi"] == f"https://doi.org/{paper.doi.lower()}"
    assert isinstance(ours["abstract_inverted_index"], dict) and ours["referenced_works"]
    assert set(ours["authorships"][0]) <= set(real_work["authorships"][0])
    _, real_page = recorded(
        "openalex", "works_filter-cited-by-W3046863325-W3045921891_perpage200_cursor-start.json"
    )
    wid = sim.view.work_id("A00-1031")
    page = get_json(sim.url, f"/works?filter=cites:{wid}&per-page=200&cursor=*")
    assert set(page) == set(real_page) and set(page["meta"]) <= set(real_page["meta"])
    assert {"count", "per_page", "next_cursor"} <= set(page["meta"])
    assert set(page["results"][0]) == set(real_work)
    core = {"id", "doi", "title", "publication_year", "ids", "referenced_works", "abstract_inverted_index"}
    assert core | {"authorships", "cited_by_count"} <= set(real_page["results"][0])
    _, real_select = recorded(
        "openalex", "works_filter-title-and-abstract.search-biodiversi_perpage1_select-ids_page1.json"
    )
    selected = get_json(sim.url, f"/works?filter=cites:{wid}&per_page=1&select=ids&page=1")
    assert set(selected["results"][0]) == set(real_select["results"][0]) == {"ids"}
    status, _, payload = call(sim.url, "/works?filter=DOESNTEXIST:1")
    assert status == 400 and set(json.loads(payload)) == set(
        recorded("openalex", "works_filter-DOESNTEXIST-1_400.json")[1]
    )


# -- paging -------------------------------------------------------------------------------------------
def test_s2_offset_paging_reaches_the_end_without_duplicates(sim) -> None:
    total = get_json(sim.url, "/graph/v1/paper/ACL:A00-1031?fields=citationCount")["citationCount"]
    seen: list[str] = []
    offset: int | None = 0
    for _ in range(100):  # bounded: 179 citers at 50 a page is 4 pages
        page = get_json(
            sim.url, f"/graph/v1/paper/ACL:A00-1031/citations?fields=title&offset={offset}&limit=50"
        )
        seen += [e["citingPaper"]["paperId"] for e in page["data"]]
        offset = page.get("next")
        if offset is None:
            break
    assert offset is None, "paging did not end"
    assert len(seen) == len(set(seen)) == total > 50


def test_openalex_cursor_paging_reaches_an_empty_last_page(sim) -> None:
    wid = sim.view.work_id("A00-1031")
    cursor, seen, count = "*", [], None
    for _ in range(100):
        page = get_json(sim.url, f"/works?filter=cites:{wid}&per-page=40&cursor={cursor}&select=id")
        count = page["meta"]["count"]
        seen += [w["id"] for w in page["results"]]
        cursor = page["meta"]["next_cursor"]
        if cursor is None:
            assert page["results"] == []  # as the real last page: results [], next_cursor null
            break
    assert cursor is None, "cursor paging did not end"
    assert len(seen) == len(set(seen)) == count > 40


# -- the honest split -----------------------------------------------------------------------------------
def test_no_dev_year_paper_edge_or_sentence_is_ever_served(sim, sim_mod, graph) -> None:
    view = sim.view
    dev = {a for a, p in graph.papers.items() if sim_mod.is_dev_paper(p)}
    assert len(dev) > 3000 and not dev & view.visible
    assert not any(a in dev or b in dev for a, cited in view.refs.items() for b in [a, *cited])
    assert not any(a in dev for cited in view.cites.values() for a in cited)
    target = a_cited_paper_with_dev_citers(graph, sim_mod)
    dev_sentences = {s for (c, d), ss in graph.contexts.items() if d == target and c in dev for s in ss}
    assert dev_sentences, "the data should hold dev sentences citing this paper"
    page = get_json(
        sim.url, f"/graph/v1/paper/ACL:{target}/citations?fields=contexts,externalIds,year&limit=1000"
    )
    assert page["data"] and "next" not in page
    assert not {e["citingPaper"]["externalIds"]["ACL"] for e in page["data"]} & dev
    assert not {s for e in page["data"] for s in e["contexts"]} & dev_sentences
    wid = view.work_id(target)
    works = get_json(sim.url, f"/works?filter=cites:{wid}&per-page=200&select=publication_year")["results"]
    assert works and not {w["publication_year"] for w in works} & {2013, 2014}
    some_dev = sorted(dev)[:: max(1, len(dev) // 50)]
    batch = get_json(sim.url, "/graph/v1/paper/batch?fields=title", {"ids": [f"ACL:{a}" for a in some_dev]})
    assert batch == [None] * len(some_dev)
    status, _, _ = call(sim.url, f"/graph/v1/paper/ACL:{some_dev[0]}")
    assert status == 404
    title = quote_plus(graph.papers[some_dev[0]].title)
    assert call(sim.url, f"/graph/v1/paper/search/match?query={title}")[0] == 404 or (
        get_json(sim.url, f"/graph/v1/paper/search/match?query={title}&fields=externalIds")["data"][0][
            "externalIds"
        ]["ACL"]
        not in dev
    )
    bulk = get_json(
        sim.url,
        "/graph/v1/paper/search/bulk?query=statistical+machine+translation&year=2012-2015&fields=year",
    )
    assert bulk["data"] and not {p["year"] for p in bulk["data"]} & {2013, 2014}


def test_the_dev_years_are_served_only_when_asked(sim_mod, graph) -> None:
    dev_paper = next(a for a in sorted(graph.papers) if sim_mod.is_dev_paper(graph.papers[a]))
    with sim_mod.Simulator(sim_mod.SimConfig(data=SHARED_DATA, hide_dev=False), graph=graph) as open_sim:
        assert get_json(open_sim.url, f"/graph/v1/paper/ACL:{dev_paper}?fields=year")["year"] in (2013, 2014)


# -- rate limit and faults --------------------------------------------------------------------------------
def test_the_rate_limiter_answers_429_with_retry_after(sim_mod, graph) -> None:
    cfg = sim_mod.SimConfig(data=SHARED_DATA, s2_rate=2.0)
    with sim_mod.Simulator(cfg, graph=graph) as limited:
        first = call(limited.url, "/graph/v1/paper/ACL:A00-1031")
        second = call(limited.url, "/graph/v1/paper/ACL:A00-1031")
        assert first[0] == 200 and second[0] == 429
        assert second[1]["retry-after"] == "1" and "message" in json.loads(second[2])
        assert call(limited.url, "/works?per-page=1")[0] == 200  # OpenAlex has its own (unlimited) bucket
        time.sleep(float(second[1]["retry-after"]))
        assert call(limited.url, "/graph/v1/paper/ACL:A00-1031")[0] == 200
        stats = limited.stats()
        assert stats["by_status"] == {"200": 3, "429": 1} and stats["requests"] == 4 and stats["ok"] == 3
    with sim_mod.Simulator(
        sim_mod.SimConfig(data=SHARED_DATA, s2_rate=2.0, retry_after=False), graph=graph
    ) as bare:
        call(bare.url, "/graph/v1/paper/ACL:A00-1031")
        status, headers, _ = call(bare.url, "/graph/v1/paper/ACL:A00-1031")
        assert status == 429 and "retry-after" not in headers  # as real S2, which sends none


def test_a_client_pacing_itself_at_the_limit_is_never_refused(sim_mod, graph) -> None:
    """The speed figure's premise: requests spaced 1/rate apart all pass (jitter tolerated)."""
    with sim_mod.Simulator(sim_mod.SimConfig(data=SHARED_DATA, s2_rate=4.0), graph=graph) as limited:
        start = time.monotonic()
        for i in range(8):
            time.sleep(max(0.0, start + i / 4.0 - time.monotonic()))
            assert call(limited.url, "/graph/v1/paper/ACL:A00-1031?fields=year")[0] == 200
        stats = limited.stats()
    assert stats["ok"] == 8 and 3.0 <= stats["ok_per_second"] <= 4.4


def _outcomes(sim_mod, graph, seed: int) -> list[str]:
    """What 40 requests, each tried up to three times, meet under a seeded mix of faults."""
    cfg = sim_mod.SimConfig(data=SHARED_DATA, seed=seed, error_rate=0.3, truncate_rate=0.2)
    out: list[str] = []
    with sim_mod.Simulator(cfg, graph=graph) as faulty:
        for acl in sorted(faulty.view.refs)[:40]:
            for _ in range(3):
                status, _, payload = call(faulty.url, f"/graph/v1/paper/ACL:{acl}/references?fields=title")
                out.append("truncated" if payload is None else str(status))
                if status == 200 and payload is not None:
                    break
        assert faulty.stats()["faults"].keys() <= {"error", "truncate"}
    return out


def test_faults_are_deterministic_for_a_seed(sim_mod, graph) -> None:
    first, again, other = (_outcomes(sim_mod, graph, s) for s in (7, 7, 8))
    assert first == again
    assert first != other
    assert {"500", "truncated", "200"} <= set(first)


def test_slow_answers_time_the_client_out(sim_mod, graph) -> None:
    cfg = sim_mod.SimConfig(data=SHARED_DATA, slow_rate=1.0, slow_seconds=2.0)
    with sim_mod.Simulator(cfg, graph=graph) as slow:
        with pytest.raises((TimeoutError, socket.timeout)):
            call(slow.url, "/graph/v1/paper/ACL:A00-1031", timeout=0.3)


def test_cursors_expire_and_chosen_papers_404(sim_mod, graph) -> None:
    cfg = sim_mod.SimConfig(data=SHARED_DATA, cursor_ttl_requests=2, missing=frozenset({"A00-1031"}))
    with sim_mod.Simulator(cfg, graph=graph) as sim:
        wid = sim.view.work_id("J93-2004")
        cursor = get_json(sim.url, f"/works?filter=cites:{wid}&per-page=5&cursor=*")["meta"]["next_cursor"]
        assert call(sim.url, f"/works?filter=cites:{wid}&per-page=5&cursor={cursor}")[0] == 200
        for _ in range(3):
            call(sim.url, "/works?per-page=1")
        status, _, payload = call(sim.url, f"/works?filter=cites:{wid}&per-page=5&cursor={cursor}")
        assert status == 400 and "expired" in json.loads(payload)["message"]
        assert call(sim.url, "/graph/v1/paper/ACL:A00-1031")[0] == 404
        assert (
            get_json(sim.url, "/graph/v1/paper/batch", {"ids": ["ACL:A00-1031", "ACL:J93-2004"]})[0] is None
        )
        assert call(sim.url, f"/works/{sim.view.work_id('A00-1031')}")[0] == 404
    cfg = sim_mod.SimConfig(data=SHARED_DATA, cursor_expire_rate=1.0)
    with sim_mod.Simulator(cfg, graph=graph) as sim:
        wid = sim.view.work_id("J93-2004")
        cursor = get_json(sim.url, f"/works?filter=cites:{wid}&per-page=5&cursor=*")["meta"]["next_cursor"]
        assert call(sim.url, f"/works?filter=cites:{wid}&per-page=5&cursor={cursor}")[0] == 400
        assert call(sim.url, f"/works?filter=cites:{wid}&per-page=5&cursor={cursor}")[0] == 200  # the retry


def test_the_simulator_binds_loopback_only(sim_mod, graph) -> None:
    with pytest.raises(ValueError, match="loopback"):
        sim_mod.Simulator(sim_mod.SimConfig(data=SHARED_DATA), graph=graph, host="0.0.0.0")


def test_the_command_line_prints_its_url_and_serves(sim_mod) -> None:
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "fetch_simulator.py"), "--port", "0", "--print-url"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        assert get_json(url, "/graph/v1/paper/ACL:A00-1031?fields=year")["year"] == 2000
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert proc.returncode == 0
