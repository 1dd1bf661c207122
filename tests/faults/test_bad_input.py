"""Bad input that must be refused or reported without touching or losing anything.

Each test is built from a reproduction of the bad-input report: a foreign SQLite file passed as
``--store``, refused imports, truncated or damaged archives, more findings than ``check`` lists.
Real sample data is used where the reproduction used it; those tests skip when it is absent.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from citewise.cli import main

from ..conftest import SHARED_DATA, require

SAMPLES = SHARED_DATA / "samples"
ZOTERO_FIXTURE = SAMPLES / "zotero" / "zotero_bbt-test-fixture.sqlite"
REPO = Path(__file__).resolve().parents[2]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _journal_mode(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize(
    "argv",
    [
        ["info"],
        ["search", "glacier"],
        ["check", str(REPO / "examples" / "draft.tex")],
        ["index"],
    ],
    ids=["info", "search", "check", "index"],
)
def test_foreign_sqlite_store_is_left_untouched(argv: list[str], tmp_path: Path, capsys) -> None:
    """A copy of a real Zotero database named as ``--store`` is refused with one clear message and
    stays byte-identical: no WAL switch, no tables, no -wal/-shm left beside it."""
    zotero = tmp_path / "zotero.sqlite"
    zotero.write_bytes(require(ZOTERO_FIXTURE).read_bytes())
    before, mode = _digest(zotero), _journal_mode(zotero)
    rc = main([*argv, "--store", str(zotero)])
    err = capsys.readouterr().err
    assert rc != 0
    assert "is not a citewise store (an SQLite database with other tables)" in err
    assert "Traceback" not in err
    assert err.count("not a citewise store") == 1
    assert _digest(zotero) == before
    assert _journal_mode(zotero) == mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["zotero.sqlite"]


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("empty.jsonl", b""),
        ("binary.json", bytes(range(256)) * 8),
        ("paper.json", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"),
    ],
)
def test_refused_import_leaves_no_source_row(name: str, content: bytes, tmp_path: Path, capsys) -> None:
    """A file that imports nothing exits 1 and is not listed among the store's sources."""
    store = tmp_path / "s.sqlite"
    assert (
        main(["index", str(REPO / "examples" / "library.bib"), "--store", str(store), "-q", "--no-embed"])
        == 0
    )
    bad = tmp_path / name
    bad.write_bytes(content)
    assert main(["index", str(bad), "--store", str(store), "-q", "--no-embed"]) == 1
    conn = sqlite3.connect(store)
    try:
        paths = [row[0] for row in conn.execute("SELECT path FROM sources")]
    finally:
        conn.close()
    assert paths == [str(REPO / "examples" / "library.bib")]
    capsys.readouterr()
    assert main(["info", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "jsonl" not in out and "(1 file)" in out
