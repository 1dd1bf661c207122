"""Reference lists from Crossref for the library papers Semantic Scholar gives none for, on the
recorded Crossref answers (``/works/{doi}?mailto=...`` with ``reference[]``, and the ``text/plain``
404 of a DOI Crossref does not register): asked once, stored through the Crossref importer (the
paper merges with its S2 copy by DOI, its references become citations), and only for the papers
S2 left without a list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewise.indexer.fetch import state
from citewise.indexer.fetch.crossref import Crossref
from citewise.indexer.fetch.http import Client
from citewise.indexer.fetch.library import Seed
from citewise.indexer.fetch.plan import NOT_FOUND, Fetcher
from citewise.indexer.fetch.s2 import S2
from citewise.indexer.records import PaperRecord
from citewise.indexer.sources.crossref import reference_ref
from citewise.indexer.store import Store
from tests.fetch_replay import API_SAMPLES, ReplayServer

MAILTO = "example@papercrow.ai"  # the address the recordings were made with
WITHHELD = "10.1038/s42256-024-00832-8"  # found on S2, its references list empty
UNKNOWN_TO_S2 = "10.1063/1.4938384"  # not found on S2
LISTED = "10.1023/a:1007154515475"  # found on S2 with references: Crossref is not asked
DATACITE = "10.48550/arxiv.2312.07559"  # Crossref answers 404 "Resource not found."


@pytest.fixture
def server():
    with ReplayServer("crossref") as s:
        yield s


def _store(tmp_path: Path) -> Store:
    """A store where an earlier S2 step left: WITHHELD resolved with an empty, finished references
    list, LISTED resolved with 12 references, UNKNOWN_TO_S2 and DATACITE not found."""
    store = Store(tmp_path / "s.db")
    store.import_source("s2", [PaperRecord(title="A paper S2 knows without references", doi=WITHHELD, ids=["corpusid:1"])], fmt="jsonl")  # fmt: skip
    tasks = [
        state.Task(f"resolve:{WITHHELD}", done=True, result="corpusid:1"),
        state.Task("s2:references:corpusid:1", "0", True, 0),
        state.Task(f"resolve:{LISTED}", done=True, result="corpusid:2"),
        state.Task("s2:references:corpusid:2", "12", True, 12),
        state.Task(f"resolve:{UNKNOWN_TO_S2}", done=True, result=NOT_FOUND),
        state.Task(f"resolve:{DATACITE}", done=True, result=NOT_FOUND),
    ]
    with store._transaction() as conn:
        state.save_tasks(conn, tasks)
    return store


def _fetcher(store: Store, server: ReplayServer) -> Fetcher:
    client = Client(default_rate=0, sleep=lambda s: None)
    return Fetcher(store, S2(client), crossref=Crossref(client, server.url, MAILTO))


def _recorded_refs(doi: str) -> set[str]:
    name = "works_" + doi.replace("/", "_").replace(":", "-") + ".json"
    work = json.loads((API_SAMPLES / "crossref" / "responses" / name).read_text())["message"]
    return {r for r in map(reference_ref, work["reference"]) if r}


def test_reference_lists_come_from_crossref_where_s2_gave_none(server: ReplayServer, tmp_path: Path) -> None:
    store = _store(tmp_path)
    seeds = [Seed([d], f"Library paper {d}", None) for d in (WITHHELD, LISTED, UNKNOWN_TO_S2, DATACITE)]
    fetcher = _fetcher(store, server)
    fetcher.crossref_references(seeds)
    asked = sorted(p.split("?")[0] for _m, p, _b in server.requests)
    assert not server.misses and len(asked) == 3 and not any("1007154515475" in p for p in asked)
    done = state.load(store, "crossref:")
    assert done[f"crossref:{WITHHELD}"].result == "103" and done[f"crossref:{DATACITE}"].result == NOT_FOUND
    assert fetcher.totals.crossref == 2
    (pid,) = store.conn.execute("SELECT id FROM papers WHERE doi=?", (WITHHELD,)).fetchone()
    assert store.count() == 2  # the S2 copy and the Crossref work of WITHHELD are one paper
    cited = {r for (r,) in store.conn.execute("SELECT cited_ref FROM citations WHERE citing=?", (pid,))}
    assert cited == _recorded_refs(WITHHELD) and len(cited) > 90
    sources = {s for (s,) in store.conn.execute("SELECT source FROM paper_sources WHERE paper_id=?", (pid,))}
    assert sources == {"s2", state.CROSSREF_SOURCE}
    fetcher.crossref_references(seeds)
    assert len(server.requests) == 3  # each asked once, the 404 too
