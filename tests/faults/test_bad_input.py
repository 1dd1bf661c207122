"""Bad input that must be refused or reported without touching or losing anything.

Each test is built from a reproduction of the bad-input report: a foreign SQLite file passed as
``--store``, refused imports, truncated or damaged archives, more findings than ``check`` lists.
Real sample data is used where the reproduction used it; those tests skip when it is absent.
"""

from __future__ import annotations

import gzip
import hashlib
import json
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


ARXIV = SAMPLES / "arxiv" / "arxiv-metadata-oai-snapshot.first200.jsonl"


def _arxiv_copies(n: int) -> bytes:
    """The arXiv sample replicated to ``n`` records with new ids and titles (as the report's
    ``arx3000.jsonl``), so every line is a distinct paper."""
    base = [json.loads(line) for line in require(ARXIV).read_text().splitlines() if line.strip()]
    out = []
    for i in range(n):
        rec = dict(base[i % len(base)])
        rec["id"] = f"2999.{i:05d}"
        rec["title"] = f"{rec['title']} (copy {i})"
        rec.pop("doi", None)
        out.append(json.dumps(rec))
    return ("\n".join(out) + "\n").encode()


def _papers(store: Path) -> int:
    conn = sqlite3.connect(store)
    try:
        return conn.execute("SELECT count(*) FROM papers").fetchone()[0]
    finally:
        conn.close()


def _index(files: list[Path], store: Path, capsys) -> tuple[int, str]:
    rc = main(["index", *map(str, files), "--store", str(store), "--no-embed", "-q"])
    return rc, capsys.readouterr().err


def test_truncated_gzip_exits_non_zero_and_keeps_what_was_read(tmp_path: Path, capsys) -> None:
    """A gzip download cut in half: the records before the cut are kept, the command exits 1 and
    says which file and how much was kept, in one line, without a traceback."""
    data = gzip.compress(_arxiv_copies(400))
    cut = tmp_path / "arx400_trunc.jsonl.gz"
    cut.write_bytes(data[: len(data) // 2])
    store = tmp_path / "s.sqlite"
    rc, err = _index([cut], store, capsys)
    kept = _papers(store)
    assert rc == 1
    assert 0 < kept < 400
    lines = [line for line in err.splitlines() if str(cut) in line]
    assert len(lines) == 1, err
    assert (
        "not read to its end" in lines[0] and f"the {kept:,} records before that point are kept" in lines[0]
    )
    assert "Traceback" not in err
    rc, _ = _index([cut], store, capsys)  # the same command again: nothing lost, nothing doubled
    assert rc == 1 and _papers(store) == kept


def test_gzip_with_trailing_garbage_keeps_every_record(tmp_path: Path, capsys) -> None:
    """Bytes after the last gzip member: every record before them is imported (as zcat reads
    them), and the damage is one line with the file and the byte offset, exit 1."""
    data = gzip.compress(_arxiv_copies(600))
    bad = tmp_path / "g.jsonl.gz"
    bad.write_bytes(data + b"GARBAGEGARBAGE")
    store = tmp_path / "g.sqlite"
    rc, err = _index([bad], store, capsys)
    assert rc == 1
    assert _papers(store) == 600
    lines = [line for line in err.splitlines() if str(bad) in line]
    assert len(lines) == 1, err
    assert f"bytes that are not gzip data after its end, at byte {len(data):,}" in lines[0]
    assert "the 600 records before that point are kept" in lines[0]


def test_truncated_zst_in_a_folder_is_reported(tmp_path: Path, capsys) -> None:
    """A folder of dump parts with one ``.zst`` cut short: the good part is imported, the cut one
    is named with where it ends (never passed over like a README), exit 1; named on its own it is
    "cut short", not "unknown format"."""
    zstandard = pytest.importorskip("zstandard")
    folder = tmp_path / "zstdir"
    folder.mkdir()
    good = b"".join(require(ARXIV).read_bytes().splitlines(keepends=True)[:100])
    (folder / "part_0.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(good))
    whole = zstandard.ZstdCompressor().compress(_arxiv_copies(3000))
    cut = folder / "part_1.jsonl.zst"
    cut.write_bytes(whole[: len(whole) // 4])
    store = tmp_path / "s.sqlite"
    rc, err = _index([folder], store, capsys)
    assert rc == 1
    assert _papers(store) >= 100
    lines = [line for line in err.splitlines() if "part_1.jsonl.zst" in line]
    assert len(lines) == 1, err
    assert f"the zstd data is cut short (truncated at byte {len(whole) // 4:,})" in lines[0]
    rc, err = _index([cut], tmp_path / "alone.sqlite", capsys)
    assert rc == 1 and "cut short" in err and "unknown format" not in err


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_check_says_what_the_findings_cap_left_out(as_json: bool, tmp_path: Path, capsys) -> None:
    """5,000 missing keys: the first 1,000 are listed and the other 4,000 counted, in text and
    --json, instead of "1000 findings" as if that were all."""
    many = tmp_path / "many.tex"
    body = "".join(f"Some words \\cite{{nosuchkey{i}}}.\n" for i in range(5000))
    many.write_text("\\documentclass{article}\\begin{document}\n" + body + "\\end{document}\n")
    library = REPO / "examples" / "library.bib"
    store = tmp_path / "s.sqlite"
    assert main(["index", str(library), "--store", str(store), "-q", "--no-embed"]) == 0
    capsys.readouterr()
    argv = ["check", str(many), "--bib", str(library), "--store", str(store)]
    rc = main([*argv, "--json"] if as_json else argv)
    out = capsys.readouterr().out
    assert rc == 1
    if as_json:
        rows = [json.loads(line) for line in out.splitlines()]
        assert sum(1 for r in rows if r.get("code") == "unknown-key") == 1000
        assert rows[-1] == {"file": str(many), "not_shown": 4000, "not_checked": 0, "limit": 1000}
    else:
        assert "... and 4,000 more unknown-key findings not shown" in out
        assert (
            out.rstrip()
            .splitlines()[-1]
            .endswith("1000 findings (1000 unknown-key) ... and 4,000 more not shown")
        )


@pytest.mark.parametrize("where", ["first", "middle", "document"])
def test_deeply_nested_json_is_one_bad_record(where: str, tmp_path: Path, capsys) -> None:
    """A value nested 100,000 deep is one invalid line: no traceback, the records around it
    import; as a whole pretty-printed document it is refused with a message, not a crash."""
    bomb = "[" * 100_000 + "]" * 100_000
    good = require(ARXIV).read_text().splitlines()[:3]
    path = tmp_path / ("bomb.json" if where == "document" else "bomb.jsonl")
    lines = {
        "first": [bomb, *good],
        "middle": [good[0], bomb, *good[1:]],
        "document": [bomb[:50_000], bomb[50_000:]],
    }
    path.write_text("\n".join(lines[where]) + "\n")
    rc, err = _index([path], tmp_path / "s.sqlite", capsys)
    assert "Traceback" not in err and "RecursionError" not in err
    if where == "document":
        assert rc == 1 and str(path) in err
        return
    assert rc == 0 and _papers(tmp_path / "s.sqlite") == 3
    assert "nested too deeply to read" in err


def test_format_is_not_decided_by_one_malformed_first_record(tmp_path: Path, capsys) -> None:
    """An arXiv snapshot whose first line lacks its ``id`` is still read as arXiv: the good lines
    keep their arXiv ids, years and authors, the bad one is named."""
    recs = [json.loads(line) for line in require(ARXIV).read_text().splitlines()[20:24]]
    del recs[0]["id"]
    recs[3]["id"], recs[3]["title"] = "2997.00003", "Good control arxiv record"
    path = tmp_path / "arx_missing.jsonl"
    path.write_text("\n".join(map(json.dumps, recs)) + "\n")
    store = tmp_path / "s.sqlite"
    rc, err = _index([path], store, capsys)
    assert rc == 0 and "arx_missing.jsonl:1: no arXiv 'id'" in err
    conn = sqlite3.connect(store)
    try:
        row = conn.execute(
            "SELECT uid, arxiv, year, authors FROM papers WHERE title LIKE 'Good control%'"
        ).fetchone()
    finally:
        conn.close()
    assert row[:3] == ("arxiv:2997.00003", "2997.00003", 2007)
    assert json.loads(row[3]) == ["Serga, A. A.", "Kostylev, M.", "Hillebrands, B."]


def test_huge_field_is_refused_and_nul_taken_out(tmp_path: Path, capsys) -> None:
    """A JSON Lines record with a 5 MB title is refused (one problem, the file goes on); NUL
    characters are not stored inside titles."""
    rows = [
        {"id": "huge", "title": "x" * 5_000_000},
        {"id": "nul", "title": "Null\x00 byte title", "year": 2020},
        {"id": "fine", "title": "A fine title", "year": 2021},
    ]
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(map(json.dumps, rows)) + "\n")
    store = tmp_path / "s.sqlite"
    rc, err = _index([path], store, capsys)
    assert rc == 0
    assert "big.jsonl:1: record not stored: a title of 5,000,000 characters (at most 4,000)" in err
    conn = sqlite3.connect(store)
    try:
        titles = sorted(row[0] for row in conn.execute("SELECT title FROM papers"))
    finally:
        conn.close()
    assert titles == ["A fine title", "Null byte title"]
    assert store.stat().st_size < 1_000_000
