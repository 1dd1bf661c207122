"""Library preprints Semantic Scholar does not know, from arXiv by id, on the recorded arXiv
answers (Atom feeds of ``id_list`` lookups: two ids of which arXiv knows one, an old-style id, and
the 400 feed of an id it cannot read): stored through the snapshot importer, each id asked once,
and only for the papers S2 did not find."""

from __future__ import annotations

from pathlib import Path

import pytest

from citewise.indexer.fetch import state
from citewise.indexer.fetch.arxiv import ArXiv
from citewise.indexer.fetch.http import Client
from citewise.indexer.fetch.library import Seed
from citewise.indexer.fetch.plan import NOT_FOUND, Fetcher
from citewise.indexer.fetch.s2 import S2
from citewise.indexer.store import Store
from tests.fetch_replay import ReplayServer


@pytest.fixture
def server():
    with ReplayServer("arxiv") as s:
        yield s


def _fetcher(tmp_path: Path, server: ReplayServer, results: dict[str, str]) -> Fetcher:
    """A fetcher on a store where S2 resolved the seeds as ``results`` says (key -> result)."""
    store = Store(tmp_path / "s.db")
    with store._transaction() as conn:
        state.save_tasks(conn, [state.Task(f"resolve:{k}", done=True, result=r) for k, r in results.items()])
    client = Client(default_rate=0, sleep=lambda s: None)
    return Fetcher(store, S2(client), arxiv=ArXiv(client, f"{server.url}/api"))


def test_preprints_s2_did_not_find_come_from_arxiv(server: ReplayServer, tmp_path: Path) -> None:
    seeds = [Seed([f"arxiv:{a}"], "", None) for a in ("1707.08567", "0808.05394", "1605.08386")]
    fetcher = _fetcher(
        tmp_path,
        server,
        {"arxiv:1707.08567": NOT_FOUND, "arxiv:0808.05394": NOT_FOUND, "arxiv:1605.08386": "corpusid:7"},
    )
    fetcher.arxiv_preprints(seeds)
    assert not server.misses and len(server.requests) == 1  # one batch; the paper S2 found not asked
    (paper,) = fetcher.store.conn.execute(
        "SELECT title, abstract, year, arxiv, authors FROM papers"
    ).fetchall()
    title, abstract, year, arxiv, authors = paper
    assert title == "Proceedings of Workshop AEW10: Concepts in Information Theory and Communications"
    assert abstract.startswith("The 10th Asia-Europe workshop") and year == 2017 and arxiv == "1707.08567"
    assert "Kees A. Schouhamer Immink" in authors
    tasks = state.load(fetcher.store, "arxiv:")
    assert tasks["arxiv:1707.08567"].result == "found" and tasks["arxiv:0808.05394"].result == NOT_FOUND
    assert fetcher.totals.preprints == 1
    fetcher.arxiv_preprints(seeds)
    assert len(server.requests) == 1  # each id asked once, the unknown one too


def test_an_old_style_id_and_an_id_arxiv_cannot_read(server: ReplayServer, tmp_path: Path) -> None:
    old, bad = Seed(["arxiv:astro-ph/0601001"], "", None), Seed(["arxiv:abc"], "", None)
    fetcher = _fetcher(tmp_path, server, {old.key: NOT_FOUND, bad.key: NOT_FOUND})
    fetcher.arxiv_preprints([old])
    assert fetcher.store.conn.execute("SELECT arxiv, year FROM papers").fetchall() == [
        ("astro-ph/0601001", 2006)
    ]
    fetcher.arxiv_preprints([bad])  # a 400: a note, the id not asked again, nothing stored
    assert not server.misses and fetcher.store.count() == 1
    assert fetcher.totals.problems == [
        f"127.0.0.1:{server.url.rsplit(':', 1)[1]}: HTTP 400: arXiv cannot read an id of abc"
    ]
    assert state.load(fetcher.store, "arxiv:")["arxiv:abc"].result == NOT_FOUND
