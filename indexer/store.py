"""The paper store: one SQLite file with papers, an FTS5 index and the citation graph.

Why SQLite: one file a user can copy, WAL for a server that reads while a reindex writes, FTS5 for
a BM25 that is always in sync with the data. Heavier indexes (the in-memory BM25 engine, the
dense ANN index) live beside the file and are rebuilt when the store's ``generation`` changes.

Every source (a file) is imported in one transaction: an interrupted import leaves the store as
it was. Papers are deduplicated across sources by DOI, arXiv id, Anthology id, then normalised
title + year (the merge rules live in :mod:`citewise.indexer.store_merge`); ``paper_sources``
remembers which sources hold a paper so a removed source can be dropped without losing papers that
other sources still provide.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .packed_text import unpack
from .records import ImportProblem, PaperRecord, normalize_doi, normalize_title
from .store_merge import ImportStats, detach, upsert
from .store_open import StoreError, check_path, compact, connect, damaged, not_a_store, read_only
from .store_schema import MIGRATIONS, PY_MIGRATIONS, SCHEMA_VERSION, split_sql
from .workspace_sources import forget_moved, move_workspace_bibliographies, moved_sources

# Each migration's Python step by the version it starts from: the schema's own, and schema 5's
# (moving the drafts' bibliographies out), which needs the merge helpers store_schema cannot import.
MIGRATION_STEPS = {**PY_MIGRATIONS, 4: move_workspace_bibliographies}

PAPER_COLUMNS = (
    "id, uid, key, doi, arxiv, acl_id, title, abstract, authors, year, venue, entry_type, "
    "keywords, bibtex, extra, source, source_line"
)


__all__ = ["SCHEMA_VERSION", "ImportStats", "Store", "StoreError", "StoredPaper"]


@dataclass
class StoredPaper(PaperRecord):
    """A paper as the store holds it: the record plus its row id and stable id."""

    id: int = 0
    uid: str = ""


def _row_to_paper(row: sqlite3.Row | tuple) -> StoredPaper:
    (
        pid,
        uid,
        key,
        doi,
        arxiv,
        acl_id,
        title,
        abstract,
        authors,
        year,
        venue,
        entry_type,
        keywords,
        bibtex,
        extra,
        source,
        source_line,
    ) = row
    return StoredPaper(
        id=pid,
        uid=uid,
        key=key,
        doi=doi,
        arxiv=arxiv,
        acl_id=acl_id,
        title=title,
        abstract=abstract,
        authors=json.loads(authors),
        year=year,
        venue=venue,
        entry_type=entry_type,
        keywords=keywords,
        bibtex=unpack(bibtex, title, abstract),
        extra=json.loads(unpack(extra)),
        source=source,
        source_line=source_line,
    )


class Store:
    """A paper store file. Safe to share between threads: each thread gets its own connection."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        """Open (``create``: or create) the store at ``path``.

        ``created`` tells whether this call made a new store (the CLI says so: a mistyped path
        must not silently become an empty store). ``readonly`` (with ``readonly_reason``) is set
        when the file or its folder cannot be written: reads work, writes raise StoreError.
        """
        self.path = Path(path).expanduser()
        self.created = False
        self.readonly = False
        self.readonly_reason = ""
        self._ro_uri = ""
        if not check_path(self.path, create):
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create a store at {self.path}: {exc.strerror or exc}") from exc
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._migrate(create)

    # -- connections -------------------------------------------------------------------------
    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            opened = connect(self.path, uri=self._ro_uri)
            conn = opened.conn
            if opened.readonly and not self._ro_uri:
                self.readonly, self.readonly_reason, self._ro_uri = True, opened.reason, opened.uri
            conn.execute("PRAGMA foreign_keys=ON")
            if not self.readonly:
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA cache_size=-65536")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _migrate(self, create: bool = True) -> None:
        conn = self.conn
        try:
            has_meta = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
            ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise not_a_store(self.path, str(exc)) from exc
        version = 0
        try:
            if has_meta:
                row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                version = int(row[0]) if row else 0
            elif conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise not_a_store(self.path, "an SQLite database with other tables")
        except (sqlite3.DatabaseError, ValueError) as exc:
            raise not_a_store(self.path, f"unreadable schema version: {exc}") from exc
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: store schema {version} is newer than this citewise ({SCHEMA_VERSION}); upgrade citewise"
            )
        if version == 0 and not create:
            raise StoreError(
                f"{self.path}: an empty file, not a paper store yet; create one with "
                f"`citewise index FILE --store {self.path}`"
            )
        if version < SCHEMA_VERSION and self.readonly:
            if version == 0:
                raise StoreError(
                    f"{self.path}: an empty file, not a paper store yet, and read-only "
                    f"({self.readonly_reason}); pass another --store"
                )
            raise read_only(self.path, f"schema {version} needs an upgrade, {self.readonly_reason}")
        self.created = version == 0
        upgraded_from = version
        while version < SCHEMA_VERSION:
            with self._transaction():
                for statement in split_sql(MIGRATIONS[version]):
                    conn.execute(statement)
                if version in MIGRATION_STEPS:
                    MIGRATION_STEPS[version](conn)
                version += 1
                conn.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (str(version),)
                )
                conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('generation', '0')")
        if 0 < upgraded_from < 2:
            compact(conn)  # the upgrade packed the rows: give the space back once

    class _Tx:
        def __init__(self, store: Store) -> None:
            self.store = store

        def __enter__(self) -> sqlite3.Connection:
            store = self.store
            if store.readonly:
                raise read_only(store.path, store.readonly_reason)
            store._write_lock.acquire()
            try:
                store.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                store._write_lock.release()
                raise store._write_error(exc) from exc
            return store.conn

        def __exit__(self, exc_type, exc, tb) -> None:
            try:
                if exc_type is None:
                    try:
                        self.store.conn.execute("COMMIT")
                    except sqlite3.Error as err:
                        if self.store.conn.in_transaction:
                            self.store.conn.execute("ROLLBACK")
                        raise self.store._write_error(err) from err
                elif self.store.conn.in_transaction:
                    self.store.conn.execute("ROLLBACK")
            finally:
                self.store._write_lock.release()

    def _write_error(self, exc: sqlite3.Error) -> StoreError:
        """A failed write as a message the user can act on (read-only, busy, full, damaged)."""
        msg = str(exc).lower()
        if "readonly" in msg or "read-only" in msg:
            return read_only(self.path, str(exc))
        if "locked" in msg or "busy" in msg:
            return StoreError(
                f"{self.path}: the store is busy ({exc}); another citewise is writing it, try again later"
            )
        if "full" in msg:
            return StoreError(f"{self.path}: could not write ({exc}); free some disk space and run again")
        if "malformed" in msg or "corrupt" in msg:
            return damaged(self.path, exc)
        return StoreError(f"{self.path}: could not write ({exc})")

    def _transaction(self) -> Store._Tx:
        """One write transaction: committed on success, rolled back on any exception (Ctrl-C too)."""
        return Store._Tx(self)

    # -- meta ---------------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def clock(self) -> float:
        """The newest ``updated_at`` in the store (the time derived indexes were read at)."""
        row = self.conn.execute("SELECT max(updated_at) FROM papers").fetchone()
        return float(row[0] or 0.0)

    @property
    def generation(self) -> int:
        """Bumped by every committed change; derived indexes compare it to know they are stale."""
        return int(self.get_meta("generation", "0") or 0)

    # -- import -------------------------------------------------------------------------------
    def import_source(
        self,
        source: str,
        items: Iterable[PaperRecord | ImportProblem],
        *,
        fmt: str,
        sync: bool = True,
        on_record: Callable[[], None] | None = None,
        finish: Callable[[sqlite3.Connection, ImportStats], None] | None = None,
    ) -> ImportStats:
        """Import one source in one transaction.

        ``sync=True`` makes the store mirror the source: papers that this source held before but
        no longer contains lose it, and are deleted when no other source holds them. ``finish``
        writes what belongs to the same file (its records' citing sentences) inside the same
        transaction, so an interrupted import keeps none of the file, not half of it.
        """
        stats = ImportStats()
        try:
            st = os.stat(source)
            mtime, size = st.st_mtime, st.st_size
        except OSError:
            mtime, size = 0.0, 0
        with self._transaction() as conn:
            # Taken inside the write lock, so updated_at grows from one import to the next (the
            # BM25 delta relies on it to find what changed after an index was built).
            now = time.time()
            seen, changed = self._store_items(conn, source, items, stats, now, on_record)
            if sync and not stats.broken:
                # (A source with broken records keeps its old papers: a syntax error in one entry
                # must not delete the entries after it.)
                changed = self._detach_missing(conn, source, seen, stats) or changed
            conn.execute(
                "INSERT OR REPLACE INTO sources(path, format, mtime, size, imported_at, papers) "
                "VALUES (?, ?, ?, ?, ?, (SELECT count(*) FROM paper_sources WHERE source=?))",
                (source, fmt, mtime, size, now, source),
            )
            forget_moved(conn, source)  # a moved draft's bibliography imported on purpose: shared again
            if finish is not None:
                finish(conn, stats)
            if changed:
                self._bump_generation(conn)
        return stats

    def _store_items(
        self,
        conn: sqlite3.Connection,
        source: str,
        items: Iterable[PaperRecord | ImportProblem],
        stats: ImportStats,
        now: float,
        on_record: Callable[[], None] | None,
    ) -> tuple[set[int], bool]:
        """Upsert the records of one source inside the caller's transaction, counting outcomes in
        ``stats``; returns the ids of the papers the source holds and whether any paper changed.

        A record that SQLite cannot bind is reported as broken instead of aborting the import:
        it fails before anything of it is written, so only that record is lost."""
        seen: set[int] = set()
        changed = False
        for item in items:
            if on_record is not None:
                on_record()
            if isinstance(item, ImportProblem):
                if item.skipped:
                    stats.skipped += 1
                else:
                    stats.broken += 1
                    stats.problems.append(item)
                continue
            item.source = source
            try:
                outcome, pid = upsert(conn, item, seen, now)
            except (ValueError, TypeError, OverflowError, sqlite3.InterfaceError) as exc:
                # A value SQLite cannot bind (a 30-digit year, a lone surrogate).
                stats.broken += 1
                stats.problems.append(ImportProblem(source, item.source_line, f"record not stored: {exc}"))
                continue
            seen.add(pid)
            changed = stats.count_outcome(outcome) or changed
        return seen, changed

    def _detach_missing(
        self, conn: sqlite3.Connection, source: str, seen: set[int], stats: ImportStats
    ) -> bool:
        """Detach from ``source`` the papers it held before but not in this import (a sync), so the
        store mirrors an edited .bib; returns whether any paper was detached."""
        stale = [
            pid
            for (pid,) in conn.execute("SELECT paper_id FROM paper_sources WHERE source=?", (source,))
            if pid not in seen
        ]
        if not stale:
            return False
        stats.removed += detach(conn, source, stale)
        return True

    def _bump_generation(self, conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='generation'")

    def resolve_citations(self) -> int:
        """Point citation rows at stored papers (by DOI, arXiv id, Anthology id, stable id, key, or
        an id of the open sources: ``paper_ids``), in that order of precedence.

        Returns the number of citations newly resolved."""
        with self._transaction() as conn:
            before = conn.execute("SELECT count(*) FROM citations WHERE cited IS NOT NULL").fetchone()[0]
            # One indexed probe per id column (an OR over the columns of one subquery is planned
            # as a scan of papers for each citation row once a non-column id joins it).
            conn.execute(
                """
                UPDATE citations SET cited = COALESCE(
                    (SELECT id FROM papers WHERE doi = citations.cited_ref LIMIT 1),
                    (SELECT id FROM papers WHERE arxiv = citations.cited_ref LIMIT 1),
                    (SELECT id FROM papers WHERE acl_id = citations.cited_ref LIMIT 1),
                    (SELECT id FROM papers WHERE uid = citations.cited_ref LIMIT 1),
                    (SELECT id FROM papers WHERE key != '' AND key = citations.cited_ref LIMIT 1),
                    (SELECT paper_id FROM paper_ids WHERE ref = citations.cited_ref))
                WHERE cited IS NULL
                """
            )
            after = conn.execute("SELECT count(*) FROM citations WHERE cited IS NOT NULL").fetchone()[0]
            return int(after - before)

    def drop_source(self, source: str) -> int:
        """Forget a source; papers that no other source holds are deleted. Returns papers removed."""
        with self._transaction() as conn:
            pids = [
                pid for (pid,) in conn.execute("SELECT paper_id FROM paper_sources WHERE source=?", (source,))
            ]
            removed = detach(conn, source, pids)
            conn.execute("DELETE FROM source_abstracts WHERE source=?", (source,))
            conn.execute("DELETE FROM sources WHERE path=?", (source,))
            if pids:
                self._bump_generation(conn)
        return removed

    def moved_sources(self) -> list[dict]:
        """The drafts' bibliographies an upgrade moved out of this store (``workspace_sources``)."""
        return moved_sources(self.conn)

    def sources(self) -> list[dict]:
        cur = self.conn.execute(
            "SELECT path, format, mtime, size, imported_at, papers FROM sources ORDER BY path"
        )
        return [
            dict(zip(("path", "format", "mtime", "size", "imported_at", "papers"), r, strict=True))
            for r in cur
        ]

    def source_is_current(self, path: str) -> bool:
        """True when the source file has not changed (mtime and size) since its last import."""
        row = self.conn.execute("SELECT mtime, size FROM sources WHERE path=?", (path,)).fetchone()
        if row is None:
            return False
        try:
            st = os.stat(path)
        except OSError:
            return False
        return abs(st.st_mtime - row[0]) < 1e-6 and st.st_size == row[1]

    # -- reading ------------------------------------------------------------------------------
    def count(self, where: str = "", params: tuple = ()) -> int:
        sql = "SELECT count(*) FROM papers" + (f" WHERE {where}" if where else "")
        return int(self.conn.execute(sql, params).fetchone()[0])

    def get(self, pid: int) -> StoredPaper | None:
        row = self.conn.execute(f"SELECT {PAPER_COLUMNS} FROM papers WHERE id=?", (pid,)).fetchone()
        return _row_to_paper(row) if row else None

    def get_many(self, pids: list[int]) -> dict[int, StoredPaper]:
        """Papers by id, in one query per 500 ids."""
        out: dict[int, StoredPaper] = {}
        for i in range(0, len(pids), 500):
            chunk = pids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.conn.execute(f"SELECT {PAPER_COLUMNS} FROM papers WHERE id IN ({marks})", chunk):
                paper = _row_to_paper(row)
                out[paper.id] = paper
        return out

    def find_keys(self, keys: Iterable[str]) -> dict[str, StoredPaper]:
        """Papers by cite key (their own key or a source's), in two queries per 500 keys.

        Why: a draft citing thousands of keys is checked against the store on every analysis;
        one :meth:`find` per key made that thousands of queries.
        """
        wanted = sorted({k for k in keys if k})
        out: dict[str, StoredPaper] = {}
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.conn.execute(f"SELECT {PAPER_COLUMNS} FROM papers WHERE key IN ({marks})", chunk):
                paper = _row_to_paper(row)
                out.setdefault(paper.key, paper)
            rest = [k for k in chunk if k not in out]
            if rest:
                marks = ",".join("?" * len(rest))
                rows = self.conn.execute(
                    f"SELECT s.key, {', '.join('p.' + c.strip() for c in PAPER_COLUMNS.split(','))} FROM paper_sources s "
                    f"JOIN papers p ON p.id = s.paper_id WHERE s.key IN ({marks})",
                    rest,
                ).fetchall()
                for row in rows:
                    out.setdefault(row[0], _row_to_paper(row[1:]))
        return out

    def find(
        self, *, doi: str = "", arxiv: str = "", key: str = "", title: str = "", year: int | None = None
    ) -> StoredPaper | None:
        """The stored paper matching any of the identifiers given (DOI first, then arXiv, key, title)."""
        probes: list[tuple[str, tuple]] = []
        if doi:
            probes.append(("doi=?", (normalize_doi(doi),)))
        if arxiv:
            probes.append(("arxiv=?", (arxiv.lower(),)))
        if key:
            probes.append(("key=?", (key,)))
            probes.append(("id IN (SELECT paper_id FROM paper_sources WHERE key=?)", (key,)))
        if title:
            nt = normalize_title(title)
            if year is not None:
                probes.append(("norm_title=? AND year=?", (nt, year)))
            probes.append(("norm_title=?", (nt,)))
        for where, params in probes:
            row = self.conn.execute(
                f"SELECT {PAPER_COLUMNS} FROM papers WHERE {where} LIMIT 1", params
            ).fetchone()
            if row:
                return _row_to_paper(row)
        return None

    def find_all(
        self, *, doi: str = "", arxiv: str = "", title: str = "", limit: int = 20
    ) -> list[StoredPaper]:
        """Every stored paper (up to ``limit``) with this DOI, arXiv id or normalised title: where
        :meth:`find` answers "which paper", this answers "which papers", as a check of a ``.bib``
        entry against the store needs (two versions of one title, a DOI held twice)."""
        if doi:
            where, params = "doi=?", (normalize_doi(doi),)
        elif arxiv:
            where, params = "arxiv=?", (arxiv.lower(),)
        elif title:
            where, params = "norm_title=?", (normalize_title(title),)
        else:
            return []
        rows = self.conn.execute(
            f"SELECT {PAPER_COLUMNS} FROM papers WHERE {where} LIMIT ?", (*params, limit)
        ).fetchall()
        return [_row_to_paper(r) for r in rows]

    def sources_of(self, pids: list[int]) -> dict[int, set[str]]:
        """The sources (file paths) that hold each paper."""
        out: dict[int, set[str]] = {}
        for i in range(0, len(pids), 500):
            chunk = pids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for pid, src in self.conn.execute(
                f"SELECT paper_id, source FROM paper_sources WHERE paper_id IN ({marks})", chunk
            ):
                out.setdefault(pid, set()).add(src)
        return out

    def iter_papers(self, where: str = "", params: tuple = (), batch: int = 2000) -> Iterator[StoredPaper]:
        """Every paper (optionally filtered), streamed in id order with bounded memory."""
        last = 0
        cond = f" AND ({where})" if where else ""
        while True:
            rows = self.conn.execute(
                f"SELECT {PAPER_COLUMNS} FROM papers WHERE id > ?{cond} ORDER BY id LIMIT ?",
                (last, *params, batch),
            ).fetchall()
            if not rows:
                return
            for row in rows:
                yield _row_to_paper(row)
            last = rows[-1][0]

    def cited_by(self, pids: list[int]) -> dict[int, list[int]]:
        """For each citing paper, the stored papers it cites (citation-graph navigation)."""
        out: dict[int, list[int]] = {}
        for i in range(0, len(pids), 500):
            chunk = pids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for citing, cited in self.conn.execute(
                f"SELECT citing, cited FROM citations WHERE cited IS NOT NULL AND citing IN ({marks})", chunk
            ):
                out.setdefault(citing, []).append(cited)
        return out

    def info(self) -> dict:
        """Counts and sizes for ``citewise info``."""
        conn = self.conn
        types = dict(conn.execute("SELECT entry_type, count(*) FROM papers GROUP BY entry_type").fetchall())
        size = self.path.stat().st_size if self.path.exists() else 0
        wal = Path(str(self.path) + "-wal")
        return {
            "store": str(self.path),
            "schema_version": int(self.get_meta("schema_version", "0") or 0),
            "generation": self.generation,
            "papers": self.count(),
            "with_abstract": self.count("abstract != ''"),
            "with_doi": self.count("doi != ''"),
            "entry_types": types,
            "citations": int(conn.execute("SELECT count(*) FROM citations").fetchone()[0]),
            "resolved_citations": int(
                conn.execute("SELECT count(*) FROM citations WHERE cited IS NOT NULL").fetchone()[0]
            ),
            "sources": int(conn.execute("SELECT count(*) FROM sources").fetchone()[0]),
            "size_bytes": size + (wal.stat().st_size if wal.exists() else 0),
        }

    # -- FTS5 ---------------------------------------------------------------------------------
    def fts_search(
        self,
        match: str,
        k: int = 10,
        weights: tuple[float, float, float] = (1.0, 1.0, 0.0),
    ) -> list[tuple[int, float]]:
        """Raw FTS5 query ranked by ``bm25()`` with column weights (title, keywords, authors).

        The full-text index is for finding a paper by title words or an author (abstracts are
        searched by the in-memory BM25). Returns (paper id, score) with higher = better. ``match``
        is an FTS5 expression; use :func:`citewise.indexer.bm25.fts_or_query` to build one.
        """
        w = ", ".join(str(float(x)) for x in weights)
        sql = (
            f"SELECT rowid, -bm25(papers_fts, {w}) AS score FROM papers_fts "
            f"WHERE papers_fts MATCH ? ORDER BY bm25(papers_fts, {w}) LIMIT ?"
        )
        try:
            return [(int(r[0]), float(r[1])) for r in self.conn.execute(sql, (match, k))]
        except sqlite3.OperationalError as exc:
            raise StoreError(f"search expression not understood: {match!r} ({exc})") from exc
