"""Opening a store file: read-write when possible, read-only when it cannot be written.

Why this is more than ``sqlite3.connect``: a store is in WAL mode, and SQLite needs to create the
``-wal`` and ``-shm`` files beside it even to read. A valid store in a read-only folder (a shared
or archived library, a read-only mount) then fails with "attempt to write a readonly database",
which used to surface as "not a citewise store". Here such a store is opened with ``mode=ro``,
and when even that needs a ``-shm`` that cannot be created, with ``immutable=1`` (no locking: safe
because nobody can write where we cannot either). Every failure becomes a :class:`StoreError`
whose message names the file and says what to do.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from citewise.errors import CitewiseError

SQLITE_MAGIC = b"SQLite format 3\x00"


class StoreError(CitewiseError):
    """A problem with the store file that the user can act on (message names the file)."""


@dataclass
class Opened:
    """A connection and how it was opened (``readonly`` with the reason, for the CLI's note)."""

    conn: sqlite3.Connection
    readonly: bool = False
    reason: str = ""  # why the store is read-only ("" when writable)
    uri: str = ""  # the read-only URI that worked, reused by other threads


def not_a_store(path: Path, detail: str) -> StoreError:
    return StoreError(f"{path} is not a citewise store ({detail}); move it away or pass another --store")


def damaged(path: Path, exc: BaseException) -> StoreError:
    return StoreError(
        f"{path}: the store is damaged ({exc}); move it away and rebuild it with "
        f"`citewise index FILE --store {path}`"
    )


def read_only(path: Path, reason: str) -> StoreError:
    return StoreError(
        f"{path}: cannot write to the store ({reason}); make it writable or pass another --store"
    )


def check_path(path: Path, create: bool) -> bool:
    """Refuse paths that cannot be a store before SQLite sees them. True when the file exists."""
    if path.is_dir():
        raise StoreError(f"{path} is a folder; pass a store file, e.g. --store {path / 'papers.sqlite'}")
    if path.exists():
        if not os.access(path, os.R_OK):
            raise StoreError(f"{path}: cannot read the store (permission denied); fix its permissions")
        if 0 < path.stat().st_size < 512 and not _has_magic(path):
            # SQLite takes a file of a few bytes for an empty database and would write a store
            # over whatever the user had there.
            raise not_a_store(path, "not an SQLite file")
        return True
    if not create:
        raise StoreError(f"{path}: no paper store here; create one with `citewise index FILE --store {path}`")
    parent = _existing_parent(path)
    if not parent.is_dir():
        raise StoreError(f"cannot create a store at {path}: {parent} is not a folder; pass another --store")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StoreError(f"cannot create a store at {path}: {parent} is not writable; pass another --store")
    return False


def _has_magic(path: Path) -> bool:
    """Whether a file under 512 bytes starts like an SQLite database.

    Only ever called on files that small: no database SQLite has initialised is under 512 bytes,
    so no connection of this process can hold locks on it. (Opening and closing a file that
    SQLite has open drops all of this process's POSIX locks on it -- SQLite's own warning in
    "How To Corrupt An SQLite Database File" -- and a concurrent writer then corrupts it.)"""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the store ({exc.strerror or exc})") from exc
    return SQLITE_MAGIC.startswith(head)


def _existing_parent(path: Path) -> Path:
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def _writable(path: Path) -> str:
    """Why the store cannot be written ("" when it can): the file, or the folder (for -wal/-shm)."""
    file_ro = path.exists() and not os.access(path, os.W_OK)
    folder_ro = not os.access(path.parent, os.W_OK | os.X_OK)
    if file_ro and folder_ro:
        return "the file and its folder are read-only"
    if file_ro:
        return "the file is read-only"
    if folder_ro:
        return "its folder is not writable"
    return ""


def _is_read_only_error(exc: sqlite3.Error) -> bool:
    msg = str(exc).lower()
    return "readonly" in msg or "read-only" in msg or "unable to open" in msg


def _probe(conn: sqlite3.Connection) -> None:
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()


PAGE_SIZE = 16384


def compact(conn: sqlite3.Connection) -> bool:
    """Rewrite the file with :data:`PAGE_SIZE` pages and no free space (after an upgrade packed its
    rows). A page size can only change outside WAL mode, so this needs the file to itself: when
    another process has it open, it is left as it is (the free pages are reused by later imports)
    and False returned."""
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        conn.execute("VACUUM")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.execute("PRAGMA journal_mode=WAL")


def _ro_uri(path: Path) -> str:
    return "file:" + quote(str(path.resolve())) + "?mode=ro"


def vet_existing(path: Path) -> None:
    """Refuse an existing SQLite file that is not a citewise store, touching nothing.

    Why before anything else: the read-write open below sets WAL mode, which rewrites the file's
    header. Run on another application's database (a Zotero file passed as ``--store``), that
    switched the user's database to WAL for good before "not a citewise store" was said, even from
    ``check`` and ``info``, which promise to write nothing. A ``mode=ro`` connection never writes
    the file. A citewise store is one with a ``meta`` table holding ``schema_version``, or a file
    with no tables at all (empty: a store about to be created)."""
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        conn = _connect_uri(_ro_uri(path))
    except sqlite3.Error:
        return  # cannot even open it read-only: the open below says why
    try:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not names:
            return
        row = None
        if "meta" in names:
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            raise not_a_store(path, "an SQLite database with other tables")
    except sqlite3.OperationalError as exc:
        if _is_read_only_error(exc):
            return  # a WAL store whose -shm cannot be made: the read-only path handles it
        raise _classify(path, exc) from exc
    except sqlite3.DatabaseError as exc:
        raise _classify(path, exc) from exc
    finally:
        conn.close()


def connect(path: Path, *, uri: str = "") -> Opened:
    """A connection to ``path``: read-write in WAL mode, else read-only (reason given).

    An existing file is first vetted read-only (:func:`vet_existing`): nothing that writes runs on
    a file that is not a citewise store."""
    if uri:
        return Opened(_connect_uri(uri), readonly=True, uri=uri)
    vet_existing(path)
    reason = _writable(path)
    if not reason:
        try:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
            _probe(conn)
            # Rows hold a packed BibTeX entry and an abstract (~1.8 KB): 16 KB pages fit them ~9 to a
            # page instead of 2 (a 4 KB page wasted a quarter). Only a new file takes this.
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
            conn.execute("PRAGMA journal_mode=WAL")
            return Opened(conn)
        except sqlite3.OperationalError as exc:
            if not _is_read_only_error(exc):
                raise _classify(path, exc) from exc
            reason = str(exc)
        except sqlite3.DatabaseError as exc:
            raise _classify(path, exc) from exc
    base = "file:" + quote(str(path.resolve()))
    last: sqlite3.Error | None = None
    for candidate in (base + "?mode=ro", base + "?immutable=1"):
        try:
            conn = _connect_uri(candidate)
            _probe(conn)
            wal = Path(f"{path}-wal")
            if candidate.endswith("immutable=1") and wal.exists() and wal.stat().st_size:
                reason += f"; changes still in {wal.name} are not visible until a writable open folds them in"
            return Opened(conn, readonly=True, reason=reason, uri=candidate)
        except sqlite3.OperationalError as exc:
            last = exc
        except sqlite3.DatabaseError as exc:
            raise _classify(path, exc) from exc
    raise StoreError(f"{path}: cannot open the store read-only ({last}); check its permissions")


def _connect_uri(uri: str) -> sqlite3.Connection:
    return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=30)


def _classify(path: Path, exc: sqlite3.Error) -> StoreError:
    msg = str(exc).lower()
    if "not a database" in msg:
        return not_a_store(path, "not an SQLite file")
    if "malformed" in msg or "corrupt" in msg:
        return damaged(path, exc)
    if "locked" in msg or "busy" in msg:
        return StoreError(
            f"{path}: the store is busy ({exc}); another program (another citewise, or the "
            "application that owns this file) is writing it; try again later or pass another --store"
        )
    return not_a_store(path, str(exc))
