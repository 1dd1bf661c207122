"""How far a fetch got, kept in the store (``fetch_state``, schema 6) and written in the same
transaction as the page it describes.

Why in the store and in that transaction: a fetch is interrupted (Ctrl-C, a closed laptop,
``kill -9``) at any moment; the page's papers, its edges with their citing sentences and the
cursor after it are committed together or not at all, so the same command again continues
exactly after the last committed page, and a page is never stored twice. A state file beside the
store could disagree with it after a crash.

Tasks, one row each: ``resolve:<id of a library paper>`` (``result``: the S2 ref it resolved to,
``""`` when S2 knows none), ``s2:references:<ref>`` / ``s2:citations:<ref>`` (``cursor``: the next
offset), ``openalex:<filter>`` (``cursor``: the next cursor), ``s2bulk:<query>|<years>`` (``cursor``:
the next token), ``crossref:<doi>`` (a library paper's reference list asked of Crossref; ``result``:
how many references, or ``not found``), ``arxiv:<id>`` (a library paper S2 did not find, asked
of arXiv; ``result``: ``found`` or ``not found``). A listing cut by ``--limit`` keeps its page's own cursor
and ``result`` ``skip:N`` (how much of that page is stored). ``done`` says the task is finished.

Everything fetched is held by one source a service (``fetch:semanticscholar``,
``fetch:openalex``, ``fetch:crossref``, ``fetch:arxiv``): ``citewise info`` counts what fetching gave, and ``citewise index --drop
fetch:semanticscholar`` forgets it. An edge is written unless the same citing paper, cited paper
and sentence are stored already (from any source), so a re-run, an overlap between two seeds'
lists or a dump imported before never doubles a sentence; and a pair met without a sentence is
one row at most, none beside a sentence of the pair (two seeds citing each other are met twice,
once in each one's list, and S2 may give the sentence on one side only).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..citations import _DDL, CitationEdge, _touch
from ..records import ImportProblem, PaperRecord
from ..store import ImportStats, Store

S2_SOURCE, OPENALEX_SOURCE, CROSSREF_SOURCE = "fetch:semanticscholar", "fetch:openalex", "fetch:crossref"
S2_FORMAT, OPENALEX_FORMAT, CROSSREF_FORMAT = "s2-api", "openalex", "crossref"
ARXIV_SOURCE, ARXIV_FORMAT = "fetch:arxiv", "arxiv"


@dataclass
class Task:
    """One row of ``fetch_state``."""

    name: str
    cursor: str = ""
    done: bool = False
    items: int = 0
    result: str = ""


@dataclass
class PageStats:
    """What one committed page added: papers (new or updated), edges (new sentences or pairs)."""

    papers: ImportStats = field(default_factory=ImportStats)
    edges: int = 0
    problems: list[ImportProblem] = field(default_factory=list)


def load(store: Store, prefix: str = "") -> dict[str, Task]:
    """The tasks whose name starts with ``prefix``, by name."""
    rows = store.conn.execute(
        "SELECT task, cursor, done, items, result FROM fetch_state WHERE task >= ? AND task < ?",
        (prefix, prefix + "\U0010ffff"),
    )
    return {r[0]: Task(r[0], r[1], bool(r[2]), int(r[3]), r[4]) for r in rows}


def write_page(
    store: Store,
    source: str,
    fmt: str,
    items: Iterable[PaperRecord | CitationEdge | ImportProblem],
    tasks: Iterable[Task],
) -> PageStats:
    """Store one page (its papers through the store's import and id resolution, its edges, the
    tasks' new state) in one transaction."""
    out = PageStats()
    records: list[PaperRecord | ImportProblem] = []
    edges: list[CitationEdge] = []
    for item in items:
        if isinstance(item, CitationEdge):
            edges.append(item)
        else:
            records.append(item)

    def finish(conn: sqlite3.Connection, stats: ImportStats) -> None:
        out.edges = add_edges(conn, source, edges)
        save_tasks(conn, tasks)
        if out.edges:  # new citing sentences change what the search index reads
            store._bump_generation(conn)

    out.papers = store.import_source(source, records, fmt=fmt, sync=False, finish=finish)
    out.problems = out.papers.problems
    return out


def add_edges(conn: sqlite3.Connection, source: str, edges: list[CitationEdge]) -> int:
    """Insert the edges not stored yet (same citing and cited paper and sentence, any source);
    marks the cited papers changed so the search index re-reads their citing sentences."""
    if not edges:
        return 0
    for statement in _DDL:
        conn.execute(statement)
    added = 0
    for e in dict.fromkeys(edges):  # a page may repeat an item
        # Without a sentence, a pair is new only when no row holds it at all; with one, it is new
        # unless that sentence is stored (any source).
        same = "AND context=?" if e.context else ""
        cur = conn.execute(
            "INSERT INTO citation_edges(source, line, citing_ref, cited_ref, context, intents, influential) "
            "SELECT ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM citation_edges "
            f"WHERE cited_ref=? AND citing_ref=? {same})",
            (source, e.line, e.citing, e.cited, e.context, e.intents, e.influential, e.cited, e.citing)
            + ((e.context,) if e.context else ()),
        )
        added += cur.rowcount
        if e.context and cur.rowcount:  # the pair's sentence-less row, if this fetch stored one first
            conn.execute(
                "DELETE FROM citation_edges WHERE source=? AND cited_ref=? AND citing_ref=? AND context=''",
                (source, e.cited, e.citing),
            )
    if added:
        _touch(conn, {e.cited for e in edges})
    return added


def save_tasks(conn: sqlite3.Connection, tasks: Iterable[Task]) -> None:
    now = time.time()
    conn.executemany(
        "INSERT OR REPLACE INTO fetch_state(task, cursor, done, items, result, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
        [(t.name, t.cursor, int(t.done), t.items, t.result, now) for t in tasks],
    )


def counts(store: Store, source: str) -> dict[str, int]:
    """Papers and edges (rows; those with a citing sentence) a fetch source holds now."""
    conn = store.conn
    papers = conn.execute("SELECT count(*) FROM paper_sources WHERE source=?", (source,)).fetchone()[0]
    has_edges = conn.execute("SELECT 1 FROM sqlite_master WHERE name='citation_edges'").fetchone()
    edges = sentences = 0
    if has_edges:
        edges, sentences = conn.execute(
            "SELECT count(*), coalesce(sum(context != ''), 0) FROM citation_edges WHERE source=?", (source,)
        ).fetchone()
    return {"papers": int(papers), "edges": int(edges), "sentences": int(sentences)}
