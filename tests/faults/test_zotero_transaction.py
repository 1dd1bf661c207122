"""A Zotero database read while Zotero holds a large transaction open imports only committed data.

The reproduction of the bad-input report: another process (Zotero, here a plain SQLite client
doing what a sync does) opens an exclusive transaction on a real Zotero database, rewrites every
field value and item key, and inserts enough rows that its page cache spills uncommitted pages
into ``zotero.sqlite`` itself, with the originals in ``zotero.sqlite-journal``. ``citewise index``
run meanwhile must import the library as last committed (the originals), never the changes that
the writer then rolls back, and must not write the database.
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from citewise.cli import main
from citewise.indexer.sources.zotero_db import has_log, stamp

from ..conftest import SHARED_DATA, require

ZOTERO_FIXTURE = SHARED_DATA / "samples" / "zotero" / "zotero_bbt-test-fixture.sqlite"

# The writer: a transaction larger than its page cache (5 pages), held open until told on stdin.
WRITER = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("PRAGMA cache_size=5")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("UPDATE itemDataValues SET value='UNCOMMITTED '||value")
    conn.execute("UPDATE items SET key='ZZ'||key")
    conn.executemany("INSERT INTO itemDataValues(value) VALUES (?)", ((f"filler {i} " * 8,) for i in range(20000)))
    print("open", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
    conn.close()
    print("rolled back", flush=True)
    """
)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rows(store: Path) -> tuple[list[str], list[str]]:
    conn = sqlite3.connect(store)
    try:
        titles = sorted(r[0] for r in conn.execute("SELECT title FROM papers"))
        keys = sorted(r[0] for r in conn.execute("SELECT key FROM papers"))
    finally:
        conn.close()
    return titles, keys


def _immutable_titles(path: Path) -> list[str]:
    """What the main file alone holds now (as ``immutable=1`` reads it, ignoring the journal)."""
    conn = sqlite3.connect(f"{path.as_uri()}?immutable=1&mode=ro", uri=True)
    try:
        return [
            r[0] for r in conn.execute("SELECT value FROM itemDataValues WHERE value LIKE 'UNCOMMITTED %'")
        ]
    finally:
        conn.close()


def test_zotero_read_during_an_open_transaction_imports_only_committed_data(tmp_path: Path, capsys) -> None:
    """The import during the writer's transaction equals the import after its rollback: the same
    titles and keys, none ``UNCOMMITTED``; the database is not written by the read."""
    zotero = tmp_path / "zotero" / "zotero.sqlite"
    zotero.parent.mkdir()
    zotero.write_bytes(require(ZOTERO_FIXTURE).read_bytes())
    committed = tmp_path / "committed.sqlite"
    assert main(["index", str(zotero), "--store", str(committed), "-q", "--no-embed"]) == 0
    quiet = stamp(zotero)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(zotero)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout.readline().strip() == "open"
        # The case the test is about, or it proves nothing: changes spilled into the main file.
        assert has_log(zotero) and _immutable_titles(zotero), "the writer's transaction did not spill"
        assert stamp(zotero) != quiet  # the journal is part of the stamp
        during = _digest(zotero)
        store = tmp_path / "during.sqlite"
        rc = main(["index", str(zotero), "--store", str(store), "-q", "--no-embed"])
        err = capsys.readouterr().err
        assert _digest(zotero) == during  # the read wrote nothing (no rollback of Zotero's file)
    finally:
        writer.communicate("\n", timeout=60)
    assert rc == 0, err
    titles, keys = _rows(store)
    assert not [t for t in titles if "UNCOMMITTED" in t] and not [k for k in keys if "UNCOMMITTED" in k]
    assert (titles, keys) == _rows(committed)
    assert len(titles) >= 40
    assert not has_log(zotero) and stamp(zotero) is not None
