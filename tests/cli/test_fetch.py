"""``citewise fetch`` end to end against the loopback replay of recorded API answers: a library
resolved and its lists paged (the recorded pages of real papers stand in for the lists of the
library's papers, which were not recorded), ``--dry-run`` sending nothing, no network in one
line, and ``kill -9`` mid-run followed by the same command giving the store an uninterrupted
run gives."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store
from tests.fetch_replay import ReplayServer, around_servers


def _servers(delay: float = 0.0) -> tuple[ReplayServer, ReplayServer]:
    return around_servers(delay)


def _library(tmp_path: Path) -> Path:
    """A store holding the three papers of the recorded batch (by corpus id, DOI and paper id)."""
    path = tmp_path / "library.db"
    lib = Store(path)
    records = [
        PaperRecord(
            title="How much should we trust differences-in-differences estimates", ids=["corpusid:470667"]
        ),
        PaperRecord(title="A paper known by its DOI to the library", doi="10.2139/ssrn.2250500"),
        PaperRecord(title="A paper known by its S2 id", ids=["s2:0f40b1f08821e22e859c6050916cec3667778613"]),
    ]
    lib.import_source("lib.jsonl", records, fmt="jsonl")
    lib.close()
    return path


def _args(tmp_path: Path, s2: ReplayServer, oa: ReplayServer, store: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "citewise.cli", "fetch", "--around", str(_library(tmp_path)), "--store", store,
        "--s2-url", f"{s2.url}/graph/v1", "--openalex-url", oa.url, "--s2-key", "test-key",
        "--limit", "300", "--no-search-index", "--no-embed", "--json", "-q", *extra,
    ]  # fmt: skip


def _content(path: str) -> tuple:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        papers = sorted(conn.execute("SELECT uid, title, abstract FROM papers").fetchall())
        edges = sorted(
            conn.execute("SELECT citing_ref, cited_ref, context, intents FROM citation_edges").fetchall()
        )
        return papers, edges
    finally:
        conn.close()


def test_fetch_around_a_library(tmp_path: Path) -> None:
    s2, oa = _servers()
    with s2, oa:
        store = str(tmp_path / "s.db")
        done = subprocess.run(_args(tmp_path, s2, oa, store), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["resolved"] == 3 and summary["not_found"] == 0
        assert summary["held"]["semanticscholar"]["sentences"] > 0 and not s2.misses
        first = _content(store)
        s2.rewind()
        again = subprocess.run(_args(tmp_path, s2, oa, store), capture_output=True, text=True, timeout=300)
        assert again.returncode == 0 and json.loads(again.stdout)["requests"] == 0  # all done: nothing asked
        assert _content(store) == first


def test_dry_run_sends_nothing(tmp_path: Path) -> None:
    s2, oa = _servers()
    with s2, oa:
        store = tmp_path / "s.db"
        done = subprocess.run(
            _args(tmp_path, s2, oa, str(store), "--dry-run"), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert "POST " in done.stdout and "/paper/batch" in done.stdout
        assert s2.requests == [] and oa.requests == [] and not store.exists()


def test_no_network_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [
        sys.executable, "-m", "citewise.cli", "fetch", "--query", "dense retrieval", "--store", str(tmp_path / "s.db"),
        "--openalex-url", f"http://127.0.0.1:{port}", "-q",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"citewise: error: could not reach 127.0.0.1:{port}: ")
    assert lines[0].endswith("; nothing changed")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the store it would have created is not left


@pytest.mark.slow
def test_kill_mid_run_then_same_command_gives_the_same_store(tmp_path: Path) -> None:
    # Answers 0.25 s apart: the interrupted run is still running, pages still to come, when the
    # 4th page is seen stored, even on a busy machine (0.05 s let a CI run finish first).
    s2, oa = _servers(delay=0.25)
    with s2, oa:
        whole = str(tmp_path / "whole.db")
        assert (
            subprocess.run(_args(tmp_path, s2, oa, whole), capture_output=True, timeout=300).returncode == 0
        )
        killed = str(tmp_path / "killed.db")
        s2.rewind()  # the recorded batch answers 200, then 500: each run starts from the 200
        log = open(tmp_path / "killed.log", "w")  # noqa: SIM115 - closed after the kill
        proc = subprocess.Popen(_args(tmp_path, s2, oa, killed), stdout=log, stderr=log)
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None and _pages(killed) < 4:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
        assert 0 < _pages(killed), (tmp_path / "killed.log").read_text()
        s2.rewind()
        again = subprocess.run(_args(tmp_path, s2, oa, killed), capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert _content(killed) == _content(whole)


def _pages(path: str) -> int:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.1)
        try:
            return int(conn.execute("SELECT count(*) FROM fetch_state").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_ctrl_c_mid_run_exits_130_then_the_same_command_finishes(tmp_path: Path) -> None:
    """SIGINT (Ctrl-C) once pages are stored: exit 130 with one line saying what is kept; the
    same command again finishes, and the store is an uninterrupted run's."""
    s2, oa = _servers(delay=0.05)
    with s2, oa:
        whole = str(tmp_path / "whole.db")
        assert (
            subprocess.run(_args(tmp_path, s2, oa, whole), capture_output=True, timeout=300).returncode == 0
        )
        stopped = str(tmp_path / "stopped.db")
        s2.rewind()
        proc = subprocess.Popen(
            _args(tmp_path, s2, oa, stopped), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None and _pages(stopped) < 4:
            time.sleep(0.05)
        assert proc.poll() is None, "the fetch ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert err.strip().startswith("citewise: interrupted: ") and "run the same command again" in err
        s2.rewind()
        again = subprocess.run(_args(tmp_path, s2, oa, stopped), capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert _content(stopped) == _content(whole)


def test_info_shows_the_fetched_sources_as_kinds_of_their_own(tmp_path: Path) -> None:
    """``citewise info`` after a fetch: ``fetch:semanticscholar`` and ``fetch:openalex`` as kinds
    (not "openalex" beside a dump), with the fetched edges and citing sentences counted."""
    s2, oa = _servers()
    with s2, oa:
        store = str(tmp_path / "s.db")
        done = subprocess.run(_args(tmp_path, s2, oa, store), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    held = json.loads(done.stdout)["held"]["semanticscholar"]
    info = subprocess.run(
        [sys.executable, "-m", "citewise.cli", "info", "--store", store, "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    got = json.loads(info.stdout)
    assert got["source_kinds"] == {"fetch:openalex": 1, "fetch:semanticscholar": 1}
    (s2_row,) = [r for r in got["by_source"]["sources"] if r["name"] == "fetch:semanticscholar"]
    assert s2_row["kind"] == "fetch:semanticscholar" and s2_row["papers"] == held["papers"]
    assert 0 < s2_row["edges"] <= held["edges"] and s2_row["sentences"] == held["sentences"]
    text = subprocess.run(
        [sys.executable, "-m", "citewise.cli", "info", "--store", store],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    assert "2 files of 2 kinds (fetch:openalex 1, fetch:semanticscholar 1)" in text
    assert any(line.rstrip().endswith("  fetch:semanticscholar") for line in text.splitlines()), text


# -- a slice: --field, --venue, --query from both APIs, on the simulated APIs over the ACL graph --------
@pytest.fixture(scope="module")
def sim():
    from tests.fetch_replay import simulator_module

    mod = simulator_module()
    with mod.Simulator(mod.SimConfig()) as server:
        yield server


def _slice(sim, store: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "citewise.cli", "fetch", *extra, "--store", str(store), "--no-search-index", "--no-embed", "-q"]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, **sim.env()})


def test_fetch_a_venue_by_name_says_the_choice_and_a_larger_limit_goes_on(sim, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    venue = ("--venue", "Computational Linguistics", "--years", "2000-2005")
    done = _slice(sim, store, *venue, "--limit", "150", "--json")
    assert done.returncode == 0, done.stderr
    note = done.stderr.strip()
    assert note.startswith(
        "citewise: note: --venue 'Computational Linguistics': Computational Linguistics (source S"
    )
    assert "the one named exactly that; also matching: " in note and "\n" not in note
    summary = json.loads(done.stdout)
    assert summary["slice"]["resolved"]["venue"]["name"] == "Computational Linguistics"
    assert summary["slice"]["apis"] == ["openalex"] and _listed(store) == {"openalex": 150}
    # works of one title merge into one paper (the journal's "Book Reviews"): fewer papers than works
    assert 100 < summary["held"]["openalex"]["papers"] <= 150
    more = _slice(sim, store, *venue, "--limit", "400", "--json")
    assert more.returncode == 0, more.stderr
    # all 220 works of those years: the cut page again from its 151st work, then the last page
    # (the cut page is the kept answer of the first run: read from the cache, not asked again)
    again = json.loads(more.stdout)
    assert _listed(store) == {"openalex": 220} and (again["cached"], again["requests"]) == (1, 1)
    conn = sqlite3.connect(store)
    years = {y for (y,) in conn.execute("SELECT year FROM papers")}
    venues = {v for (v,) in conn.execute("SELECT venue FROM papers")}
    conn.close()
    assert years <= set(range(2000, 2006)) and venues == {"Computational Linguistics"}


def _listed(store: Path) -> dict[str, int]:
    """Works each listing of the store's fetch state has stored, by API."""
    conn = sqlite3.connect(store)
    try:
        return {t.split(":", 1)[0]: n for t, n in conn.execute("SELECT task, items FROM fetch_state")}
    finally:
        conn.close()


def test_a_query_from_both_apis_estimate_and_dry_run(sim, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    query = ("--query", "semantic parsing", "--years", "2015-", "--limit", "200")
    dry = _slice(sim, store, *query, "--dry-run")
    assert dry.returncode == 0 and "/works?filter=title_and_abstract.search:semantic" in dry.stdout
    assert "/paper/search/bulk?query=semantic+parsing" in dry.stdout and "year=2015-" in dry.stdout
    estimate = _slice(sim, store, *query, "--estimate", "--json")
    assert estimate.returncode == 0, estimate.stderr
    counts = json.loads(estimate.stdout)
    assert set(counts["by_api"]) == {"openalex", "semanticscholar"} and counts["papers"] == 400
    assert not store.exists()  # neither --dry-run nor --estimate makes a store
    done = _slice(sim, store, *query, "--json")
    assert done.returncode == 0, done.stderr
    assert _listed(store) == {"openalex": 200, "s2bulk": 200}
    conn = sqlite3.connect(store)
    both = conn.execute(
        "SELECT count(*) FROM (SELECT paper_id FROM paper_sources GROUP BY paper_id HAVING count(*) = 2)"
    )
    assert both.fetchone()[0] > 0  # a paper both APIs gave is one paper
    conn.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--venue", "Language Resources and Evaluation"),
            "--venue 'Language Resources and Evaluation' is ambiguous: ",
        ),
        (("--field", "underwater basket weaving"), "--field 'underwater basket weaving': no OpenAlex field"),
        (
            ("--query", "zzqx qqzx"),
            "no paper matches --query 'zzqx qqzx' (OpenAlex and Semantic Scholar); nothing changed",
        ),
        (("--query", "x", "--years", "lately"), "--years 'lately': expected"),
        (
            ("--field", "Computer Science", "--from", "s2"),
            "--from s2: --field and --venue are OpenAlex filters",
        ),
    ],
)
def test_a_bad_slice_is_one_line_and_makes_no_store(sim, tmp_path: Path, args: tuple, message: str) -> None:
    done = _slice(sim, tmp_path / "s.db", *args)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith("citewise: error: "), done.stderr
    assert message in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_an_api_answering_html_is_one_line(tmp_path: Path) -> None:
    html = b"<!DOCTYPE html><html><body>Access denied by your institution's proxy</body></html>"
    with ReplayServer("openalex", {("GET", "/sources"): lambda q, b: (200, "text/html", html, {})}) as oa:
        cmd = [
            sys.executable, "-m", "citewise.cli", "fetch", "--venue", "Nature", "--store", str(tmp_path / "s.db"),
            "--openalex-url", oa.url, "-q",
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "answered text/html, not JSON" in lines[0] and lines[0].endswith("; nothing changed")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_kill_mid_slice_then_the_same_command_gives_the_same_store(tmp_path: Path) -> None:
    """A slice from both APIs killed (-9) once its first pages are stored; the same command again
    ends with the store an uninterrupted run gives (the cursor and the token resumed)."""
    from tests.fetch_replay import simulator_module

    mod = simulator_module()
    # OpenAlex at 4 pages a second: six pages of 200, still running when the first is seen stored.
    with mod.Simulator(mod.SimConfig(openalex_rate=4)) as slow:
        query = (
            "--query",
            "translation",
            "--years",
            "2000-",
            "--limit",
            "1200",
            "--mailto",
            "me@example.org",
        )
        whole = tmp_path / "whole.db"
        first = _slice(slow, whole, *query, "--json")
        assert first.returncode == 0, first.stderr
        killed = tmp_path / "killed.db"
        proc = subprocess.Popen(
            [sys.executable, "-m", "citewise.cli", "fetch", *query, "--store", str(killed), "--no-search-index", "--no-embed", "-q"],
            env={**os.environ, **slow.env()}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None and _pages(str(killed)) < 1:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        stored = _listed(killed)
        assert stored and stored.get("openalex", 0) < 1200, stored  # killed mid-listing
        again = _slice(slow, killed, *query, "--json")
        assert again.returncode == 0, again.stderr
    # It went on from the stored cursor: fewer pages than a whole run (restarting would store all)
    assert json.loads(again.stdout)["pages"] < json.loads(first.stdout)["pages"]
    assert _listed(killed) == _listed(whole) == {"openalex": 1200, "s2bulk": 1200}
    papers = "SELECT uid, title, abstract FROM papers ORDER BY uid"
    a, b = sqlite3.connect(killed), sqlite3.connect(whole)
    try:
        assert a.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert a.execute(papers).fetchall() == b.execute(papers).fetchall()
    finally:
        a.close()
        b.close()
