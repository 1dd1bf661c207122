"""Writing what the open sources give besides paper records: citation edges with citing sentences
(S2AG ``citations``) and abstracts that come apart from their papers (S2AG ``abstracts``).

Why apart from the paper import (``Store.import_source``): these rows are not papers. Edges go to
``citation_edges`` (indexer/citations.py), where expansion and the count prior already read them,
with the intents and influence S2AG gives. Abstracts go to ``source_abstracts`` under the paper's
ref and are copied to every stored paper with that ref that has none, after each import: so an
abstract imported before its paper is given to it when the paper arrives, and one imported after
reaches it at once. Each file is one transaction, as for papers: an interrupted import keeps
nothing of the file; a bad record is reported with its line and skipped, the rest imports.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ..citations import _DDL, CitationEdge, _touch
from ..records import ImportProblem
from ..store import Store
from .ids import SCHEMES
from .s2ag import AbstractRow

_BATCH = 2000


@dataclass
class LoadStats:
    """What one edge or abstract file gave: rows stored, problems (with lines), skips (and how
    many for each reason, for the import's summary)."""

    stored: int = 0
    skipped: int = 0
    problems: list[ImportProblem] = field(default_factory=list)
    skip_reasons: dict[str, int] = field(default_factory=dict)


def _split(
    items: Iterable[object], stats: LoadStats, on_record: Callable[[], None] | None
) -> Iterator[object]:
    """The good items of a stream; problems are counted (and kept, unless deliberate skips)."""
    for item in items:
        if on_record is not None:
            on_record()
        if isinstance(item, ImportProblem):
            if item.skipped:
                stats.skipped += 1
                stats.skip_reasons[item.skip_reason] = stats.skip_reasons.get(item.skip_reason, 0) + 1
            else:
                stats.problems.append(item)
            continue
        yield item


def _kept(items: Iterator[Any], keep: Callable[[Any], bool] | None) -> Iterator[Any]:
    return items if keep is None else (item for item in items if keep(item))


def _batches(items: Iterator[object]) -> Iterator[list]:
    while batch := list(islice(items, _BATCH)):
        yield batch


def _record_source(conn: sqlite3.Connection, source: str, fmt: str, now: float) -> None:
    try:
        st = os.stat(source)
        mtime, size = st.st_mtime, st.st_size
    except OSError:
        mtime, size = 0.0, 0
    conn.execute(
        "INSERT OR REPLACE INTO sources(path, format, mtime, size, imported_at, papers) VALUES (?, ?, ?, ?, ?, 0)",
        (source, fmt, mtime, size, now),
    )


def import_edges(
    store: Store,
    source: str,
    fmt: str,
    edges: Iterable[CitationEdge | ImportProblem],
    on_record: Callable[[], None] | None = None,
    keep: Callable[[CitationEdge], bool] | None = None,
) -> LoadStats:
    """Replace the edges of ``source`` with ``edges`` (those ``keep`` passes: the import
    filters, asked inside the transaction so they may look at the store), in one transaction."""
    stats = LoadStats()
    with store._transaction() as conn:
        for statement in _DDL:
            conn.execute(statement)
        _touch_cited(conn, source)  # what the file cited before (a re-import may drop some)
        conn.execute("DELETE FROM citation_edges WHERE source=?", (source,))
        for batch in _batches(_kept(_split(edges, stats, on_record), keep)):
            conn.executemany(
                "INSERT INTO citation_edges(source, line, citing_ref, cited_ref, context, intents, influential) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(source, e.line, e.citing, e.cited, e.context, e.intents, e.influential) for e in batch],
            )
            stats.stored += len(batch)
        _touch_cited(conn, source)
        _record_source(conn, source, fmt, time.time())
        store._bump_generation(conn)
    return stats


def _touch_cited(conn: sqlite3.Connection, source: str) -> None:
    """Mark changed the papers that this file's edges cite, so the search index re-reads their
    citing sentences: set-based for the open sources' ids, since an S2AG file cites millions of
    corpus ids (the general ``_touch`` of indexer/citations.py probes six columns for each)."""
    conn.execute(
        "UPDATE papers SET updated_at=? WHERE id IN (SELECT i.paper_id FROM paper_ids i "
        "WHERE i.ref IN (SELECT cited_ref FROM citation_edges WHERE source=?))",
        (time.time(), source),
    )
    schemes = " OR ".join(f"cited_ref GLOB '{scheme}:*'" for scheme in SCHEMES)
    plain = [
        ref
        for (ref,) in conn.execute(
            f"SELECT DISTINCT cited_ref FROM citation_edges WHERE source=? AND NOT ({schemes})", (source,)
        )
    ]
    if plain:
        _touch(conn, plain)


def import_abstracts(
    store: Store,
    source: str,
    fmt: str,
    rows: Iterable[AbstractRow | ImportProblem],
    on_record: Callable[[], None] | None = None,
    keep: Callable[[AbstractRow], bool] | None = None,
) -> LoadStats:
    """Replace the abstracts of ``source`` with ``rows`` (those ``keep`` passes), in one
    transaction, and give them to the stored papers that lack one."""
    stats = LoadStats()
    with store._transaction() as conn:
        conn.execute("DELETE FROM source_abstracts WHERE source=?", (source,))
        for batch in _batches(_kept(_split(rows, stats, on_record), keep)):
            conn.executemany(
                "INSERT OR REPLACE INTO source_abstracts(ref, source, line, abstract) VALUES (?, ?, ?, ?)",
                [(row.ref, source, row.line, row.abstract) for row in batch],
            )
            stats.stored += len(batch)
        _record_source(conn, source, fmt, time.time())
        if apply_abstracts(conn):
            store._bump_generation(conn)
    return stats


def apply_abstracts(conn: sqlite3.Connection) -> int:
    """Copy kept abstracts to the stored papers with their ref that have none (inside the
    caller's transaction); returns how many papers got one."""
    if conn.execute("SELECT 1 FROM source_abstracts LIMIT 1").fetchone() is None:
        return 0
    cur = conn.execute(
        "UPDATE papers SET updated_at=?, abstract=(SELECT a.abstract FROM paper_ids i "
        "JOIN source_abstracts a ON a.ref = i.ref WHERE i.paper_id = papers.id LIMIT 1) "
        "WHERE abstract = '' AND id IN (SELECT i.paper_id FROM source_abstracts a "
        "JOIN paper_ids i ON i.ref = a.ref)",
        (time.time(),),
    )
    return int(cur.rowcount)


def apply_kept_abstracts(store: Store) -> int:
    """:func:`apply_abstracts` in a transaction of its own (after papers were imported)."""
    if store.conn.execute("SELECT 1 FROM source_abstracts LIMIT 1").fetchone() is None:
        return 0
    with store._transaction() as conn:
        applied = apply_abstracts(conn)
        if applied:
            store._bump_generation(conn)
    return applied
