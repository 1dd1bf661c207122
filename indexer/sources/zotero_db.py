"""Reading a Zotero database (``zotero.sqlite``) without ever writing it, while Zotero runs.

Why this care: Zotero keeps its database open for as long as it runs, by default with an
exclusive lock, so a plain SQLite connection fails with "database is locked", and one that gets in
could, by the mere act of opening, checkpoint a write-ahead log or roll back a hot journal: a write
to the user's library. So the file is opened with SQLite's ``immutable=1`` (no locks taken, nothing
written), and when a non-empty log lies beside it, the database and its log are copied to a
temporary folder and the copy is read, where SQLite does what it would do for Zotero: a ``-wal``
holds commits the main file does not have yet (``immutable`` ignores it), and a ``-journal`` means
a transaction is open or was cut short, whose changes may already be in the main file (Zotero's
large transactions, a sync or an import, spill pages into it before they commit): opening the
copy rolls them back, so what is read is the library as Zotero last committed it, never data
that Zotero may still roll back. A read is kept only when the files, the logs included, did not
change while it ran; otherwise it is tried again.

Which databases: those whose ``userdata`` schema version is in :data:`USERDATA_VERSIONS` and that
have every table and column read (:data:`REQUIRED_COLUMNS`); anything else is refused in one line
that names the version found and what is missing, before a store is touched.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from citewise.errors import CitewiseError

from .detect import WrongKind

SQLITE_MAGIC = b"SQLite format 3\x00"
# Tested here: 129 (the samples' ``userdata.sql``, Zotero 7) and 125 (Better BibTeX's test
# database). Zotero raises the number a few times a year, mostly for tables citewise does not
# read, so a margin is accepted on both sides; the tables and columns read are checked whatever
# the number says, so a database in the margin that lacks one is still refused, naming it.
USERDATA_VERSIONS = range(80, 160)
# Tables (and the columns read from them) that every supported database has.
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "items": ("itemID", "itemTypeID", "libraryID", "key"),
    "itemData": ("itemID", "fieldID", "valueID"),
    "itemDataValues": ("valueID", "value"),
    "creators": ("creatorID", "firstName", "lastName", "fieldMode"),
    "itemCreators": ("itemID", "creatorID", "creatorTypeID", "orderIndex"),
    "creatorTypes": ("creatorTypeID", "creatorType"),
    "deletedItems": ("itemID",),
    "collections": ("collectionID", "collectionName", "parentCollectionID"),
    "collectionItems": ("collectionID", "itemID"),
}
# Zotero 5.0.x kept fields and item types in ``fields``/``itemTypes``; later versions add user
# types and fields in ``*Combined``. One of each pair is enough.
ALTERNATIVES = (("fieldsCombined", "fields"), ("itemTypesCombined", "itemTypes"))
_ATTEMPTS = 4  # reads tried before giving up on a database that changes under every read
_RETRY_S = 0.25

T = TypeVar("T")


class ZoteroError(CitewiseError):
    """A Zotero database that cannot be imported; the message says why, in one line."""


class UnsupportedZotero(WrongKind, ZoteroError):
    """A Zotero database of a schema citewise does not read (found while telling formats apart,
    where a file named on the command line is refused with this message)."""


LOGS = ("-wal", "-journal")  # SQLite's logs beside a database, by the suffix of their names


@dataclass(frozen=True)
class Stamp:
    """What tells that a database changed: modification time and size of the file and of each
    log beside it (``(0, 0)`` where there is none): a transaction that starts, spills into the
    file or ends changes one of them."""

    mtime_ns: int
    size: int
    wal_mtime_ns: int = 0
    wal_size: int = 0
    journal_mtime_ns: int = 0
    journal_size: int = 0


def _mtime_size(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return 0, 0
    return st.st_mtime_ns, st.st_size


def stamp(path: Path) -> Stamp | None:
    """The :class:`Stamp` of ``path`` (``None`` when the file is gone)."""
    try:
        st = path.stat()
    except OSError:
        return None
    wal = _mtime_size(Path(f"{path}-wal"))
    journal = _mtime_size(Path(f"{path}-journal"))
    return Stamp(st.st_mtime_ns, st.st_size, *wal, *journal)


def has_log(path: Path) -> bool:
    """Whether a non-empty ``-wal`` or ``-journal`` lies beside ``path``: the main file alone may
    then lack commits (a log not yet checkpointed) or hold changes not committed (a transaction
    open or cut short), so it must not be read alone."""
    return any(_mtime_size(Path(f"{path}{suffix}"))[1] > 0 for suffix in LOGS)


def _immutable(path: Path) -> sqlite3.Connection:
    """A connection that takes no lock and never writes (``immutable=1``, ``mode=ro``)."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1&mode=ro", uri=True)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # fails here if unreadable
    return conn


@contextmanager
def _copied(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to a private copy of the database and its logs, deleted afterwards: opening
    it, SQLite replays a ``-wal``'s commits into the copy and rolls a hot ``-journal`` back. The
    database is copied before its journal: a page Zotero changes meanwhile had its original
    written to the journal first, so the later journal copy holds it (a change that still slips
    between the copies changes the stamp, and the read is tried again)."""
    with tempfile.TemporaryDirectory(prefix="citewise-zotero-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        for suffix in LOGS:
            try:
                shutil.copyfile(f"{path}{suffix}", f"{copy}{suffix}")
            except FileNotFoundError:
                continue
        conn = sqlite3.connect(copy)
        try:
            yield conn
        finally:
            conn.close()


@contextmanager
def open_readonly(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection that reads ``path`` as Zotero last committed it, never writing it: the file
    itself in immutable mode, or a copy when a non-empty log lies beside it (:func:`has_log`) or
    immutable reading fails."""
    if not has_log(path):
        try:
            conn = _immutable(path)
        except sqlite3.DatabaseError:
            pass
        else:
            try:
                yield conn
            finally:
                conn.close()
            return
    with _copied(path) as conn:
        yield conn


def read_consistent(path: Path, read: Callable[[sqlite3.Connection], T]) -> T:
    """``read(conn)`` over a read-only connection to ``path``, kept only when the database did not
    change while it ran (Zotero may commit meanwhile): tried again a few times, then given up."""
    problem = "it changed during every read"
    for attempt in range(_ATTEMPTS):
        if attempt:
            time.sleep(_RETRY_S * attempt)
        before = stamp(path)
        try:
            with open_readonly(path) as conn:
                result = read(conn)
        except sqlite3.DatabaseError as exc:
            if type(exc) is sqlite3.DatabaseError and stamp(path) == before:
                raise ZoteroError(damaged(exc)) from None  # damaged, not changing: trying again won't help
            problem = f"{type(exc).__name__}: {exc}"
            continue
        if stamp(path) == before:
            return result
    raise ZoteroError(f"could not read the Zotero database ({problem}); nothing imported, try again")


def damaged(exc: sqlite3.DatabaseError) -> str:
    """The one line for a Zotero database that SQLite finds damaged (what a retry cannot mend)."""
    return (
        f"the Zotero database is damaged (SQLite says: {exc}); nothing imported. Let Zotero repair it "
        "(Help > Troubleshooting > Check Database Integrity) or restore its backup (zotero.sqlite.bak), "
        "then run this again"
    )


def _table_names(path: Path) -> set[str]:
    """The tables of ``path``, its ``-wal`` included (a citewise store's tables may all still be
    in its log): read-only (``mode=ro`` writes nothing), immutable where that cannot open it."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1)
        try:
            return tables(conn)
        finally:
            conn.close()
    except sqlite3.OperationalError:
        conn = _immutable(path)
        try:
            return tables(conn)
        finally:
            conn.close()


def describe_sqlite(path: Path) -> str:
    """What an SQLite file that is no source citewise imports is, in a few words and what to do
    (for "unknown format"): damaged or cut short, a citewise store, or another program's."""
    try:
        names = _table_names(path)
        citewise = "meta" in names and "papers" in names
    except sqlite3.DatabaseError as exc:
        return (
            f"an SQLite database that cannot be read (damaged or cut short; SQLite says: {exc}); nothing "
            "imported. If it is your Zotero database, let Zotero repair it (Help > Troubleshooting > Check "
            "Database Integrity) or restore its backup (zotero.sqlite.bak)"
        )
    if citewise:
        return "a citewise store, not a file to import; use it with --store"
    listed = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
    return (
        f"an SQLite database of another program (tables: {listed or 'none'}), not a source citewise imports"
    )


# -- what a file is ------------------------------------------------------------------------------
def tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def userdata_version(conn: sqlite3.Connection, names: set[str]) -> int | None:
    """The ``userdata`` schema version of the ``version`` table (``None`` where it has none)."""
    if "version" not in names:
        return None
    row = conn.execute("SELECT version FROM version WHERE schema='userdata'").fetchone()
    try:
        return int(row[0]) if row is not None else None
    except (TypeError, ValueError):
        return None


def looks_like_zotero(conn: sqlite3.Connection) -> bool:
    """Zotero's tables: ``version`` with a ``userdata`` row, or ``items`` with ``itemData``."""
    names = tables(conn)
    return {"items", "itemData"} <= names or userdata_version(
        conn, names
    ) is not None  # tables first: no row read


def schema_problem(conn: sqlite3.Connection) -> str | None:
    """Why this Zotero database cannot be read, in one line (``None``: it can)."""
    names = tables(conn)
    version = userdata_version(conn, names)
    found = f"userdata schema version {version}" if version is not None else "no userdata schema version"
    if version is not None and version not in USERDATA_VERSIONS:
        first, last = USERDATA_VERSIONS[0], USERDATA_VERSIONS[-1]
        return (
            f"a Zotero database of {found}, which citewise does not read (it reads versions "
            f"{first} to {last}); nothing imported"
        )
    missing = [t for t in REQUIRED_COLUMNS if t not in names]
    missing += [" or ".join(pair) for pair in ALTERNATIVES if not set(pair) & names]
    for table, columns in REQUIRED_COLUMNS.items():
        if table in names:
            have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
            missing += [f"{table}.{c}" for c in columns if c not in have]
    if missing:
        return (
            f"a Zotero database ({found}) without what citewise reads: {', '.join(missing)}; nothing imported"
        )
    return None


def _looked_at(conn: sqlite3.Connection) -> str | None | bool:
    """``False``: not Zotero's; else :func:`schema_problem`."""
    if not looks_like_zotero(conn):
        return False
    try:
        return schema_problem(conn)
    except sqlite3.DatabaseError as exc:  # Zotero's, but its pages cannot be read
        if type(exc) is not sqlite3.DatabaseError:
            raise
        return damaged(exc)


def _sniff_problem(path: Path) -> str | None | bool:
    """:func:`_looked_at` the main file alone (a copy of a big database just to look is too
    dear), or, where that cannot be read and a log lies beside it (a transaction's pages spilled
    into the file), a copy with its logs."""
    try:
        conn = _immutable(path)
        try:
            return _looked_at(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        if not has_log(path):
            raise
    with _copied(path) as copy:
        return _looked_at(copy)


def sniff(path: Path) -> bool:
    """Whether ``path`` is a Zotero database citewise reads, told by its content; one of another
    schema raises :class:`UnsupportedZotero` saying which version it is, and a Zotero backup
    (``zotero.sqlite.bak``) says to index the database itself."""
    try:
        with open(path, "rb") as fh:
            if fh.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                return False
        problem = _sniff_problem(path)
    except (OSError, sqlite3.DatabaseError):
        return False
    if problem is False:
        return False
    if problem is not None:
        raise UnsupportedZotero(problem)
    if ".bak" in path.name.lower():
        raise UnsupportedZotero(
            "a backup Zotero made of its database; index zotero.sqlite itself (a backup holds "
            "items deleted since)"
        )
    return True
