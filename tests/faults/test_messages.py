"""Messages that said the wrong thing or too little (the bad-input report's D14), one test each.

A damaged Zotero database, a truncated SQLite file or a citewise store named as a source, an
empty file and a folder without importable files each get a message that says what the file is
and what to do, never "unknown format" or "try again"; ``check`` writes keys with zero-width or
bidi characters visibly and refuses a binary draft; the language server answers a wrong
``insertCitation`` argument with -32602 in one line, and no error response carries a traceback.
"""

from __future__ import annotations

import gzip
import io
import json
import sqlite3
import sys
import time
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcInternalError

from citewise.cli import main

from ..conftest import SHARED_DATA, require

SAMPLES = SHARED_DATA / "samples"
ZOTERO_FIXTURE = SAMPLES / "zotero" / "zotero_bbt-test-fixture.sqlite"
ARXIV = SAMPLES / "arxiv" / "arxiv-metadata-oai-snapshot.first200.jsonl"
REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "examples" / "library.bib"


def _index_err(path: Path, store: Path, capsys) -> tuple[int, str]:
    rc = main(["index", str(path), "--store", str(store), "-q", "--no-embed", "--no-search-index"])
    return rc, capsys.readouterr().err


def _zotero_copy(tmp_path: Path) -> bytearray:
    return bytearray(require(ZOTERO_FIXTURE).read_bytes())


@pytest.mark.parametrize(("first", "last"), [(20, 60), (49, 64)], ids=["schema pages", "item pages"])
def test_a_damaged_zotero_database_is_called_damaged_not_try_again(
    first: int, last: int, tmp_path: Path, capsys
) -> None:
    """Pages overwritten with zeros (the header and schema intact, so it is still recognised as
    Zotero's; found while telling its format, or while reading its items): one line saying it
    is damaged and how Zotero repairs it, at once (no retries: a damaged file does not mend)."""
    data = _zotero_copy(tmp_path)
    page = int.from_bytes(data[16:18], "big")
    data[page * first : page * last] = bytes(page * (last - first))
    damaged = tmp_path / "zotero.sqlite"
    damaged.write_bytes(bytes(data))
    start = time.monotonic()
    rc, err = _index_err(damaged, tmp_path / "s.sqlite", capsys)
    assert rc != 0 and "Traceback" not in err
    assert "the Zotero database is damaged (SQLite says: database disk image is malformed)" in err
    assert "Check Database Integrity" in err and "try again" not in err and "unknown format" not in err
    assert time.monotonic() - start < 1.5  # 4 retries with back-off took 1.5 s more


@pytest.mark.parametrize("kind", ["cut short", "citewise store", "other program"])
def test_sqlite_files_that_are_no_source_say_what_they_are(kind: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "thing.sqlite"
    if kind == "cut short":
        path.write_bytes(bytes(_zotero_copy(tmp_path)[:100_000]))
        expected = "an SQLite database that cannot be read (damaged or cut short"
    elif kind == "citewise store":
        assert main(["index", str(LIBRARY), "--store", str(path), "-q", "--no-embed"]) == 0
        expected = "a citewise store, not a file to import; use it with --store"
    else:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE moz_places (id INTEGER)")
        conn.commit()
        conn.close()
        expected = "an SQLite database of another program (tables: moz_places), not a source"
    capsys.readouterr()
    rc, err = _index_err(path, tmp_path / "s.sqlite", capsys)
    assert rc != 0 and expected in err and "unknown format" not in err, err


def test_a_truncated_gzip_named_alone_is_cut_short_not_unknown(tmp_path: Path, capsys) -> None:
    data = gzip.compress(require(ARXIV).read_bytes())
    cut = tmp_path / "arxiv.jsonl.gz"
    cut.write_bytes(data[: len(data) // 3])
    rc, err = _index_err(cut, tmp_path / "s.sqlite", capsys)
    assert rc == 1 and "cut short" in err and "unknown format" not in err


@pytest.mark.parametrize("size", [1, 2, 3])
def test_an_archive_cut_within_its_magic_number_is_cut_short(size: int, tmp_path: Path, capsys) -> None:
    """A .gz of one to three bytes (found by the fuzz suite): cut short, not "invalid JSON"."""
    cut = tmp_path / "arxiv.jsonl.gz"
    cut.write_bytes(gzip.compress(require(ARXIV).read_bytes())[:size])
    rc, err = _index_err(cut, tmp_path / "s.sqlite", capsys)
    assert rc == 1 and f"the gzip data is cut short (truncated at byte {size})" in err and "JSON" not in err


def test_an_empty_file_is_called_empty(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "refs.jsonl"
    empty.touch()
    rc, err = _index_err(empty, tmp_path / "s.sqlite", capsys)
    assert rc == 1 and f"{empty}: an empty file" in err and "is it BibTeX" not in err


def test_a_folder_without_importable_files_lists_the_open_formats(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.txt").write_text("notes\n")
    rc, err = _index_err(folder, tmp_path / "s.sqlite", capsys)
    assert rc != 0 and "no importable files (looked for .bib" in err
    for kind in ("OpenAlex", "Semantic Scholar", "arXiv", "Crossref", ".gz or .zst", "zotero.sqlite"):
        assert kind in err, kind


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        ("okafor\u200b2019surge", "okafor<U+200B>2019surge"),  # a zero-width space: looks valid
        ("smith\u202e0202", "smith<U+202E>0202"),  # right-to-left override: reverses the line
    ],
    ids=["zero-width", "bidi"],
)
def test_check_writes_invisible_characters_of_keys_visibly(
    key: str, shown: str, tmp_path: Path, capsys
) -> None:
    store = tmp_path / "s.sqlite"
    assert main(["index", str(LIBRARY), "--store", str(store), "-q", "--no-embed"]) == 0
    draft = tmp_path / "draft.tex"
    draft.write_text(
        f"\\documentclass{{article}}\\begin{{document}}\nGlaciers surge \\cite{{{key}}}.\n\\end{{document}}\n"
    )
    capsys.readouterr()
    rc = main(["check", str(draft), "--bib", str(LIBRARY), "--store", str(store)])
    out = capsys.readouterr().out
    assert rc == 1
    line = next(line for line in out.splitlines() if "unknown-key" in line)
    assert shown in line and key not in line
    assert line.isprintable()
    rc = main(["check", str(draft), "--bib", str(LIBRARY), "--store", str(store), "--json"])
    rows = [json.loads(row) for row in capsys.readouterr().out.splitlines()]
    assert any(r.get("key") == key for r in rows)  # --json keeps the exact characters, for programs


def test_check_refuses_a_binary_draft(tmp_path: Path, capsys) -> None:
    store = tmp_path / "s.sqlite"
    assert main(["index", str(LIBRARY), "--store", str(store), "-q", "--no-embed"]) == 0
    binary = tmp_path / "paper.tex"
    binary.write_bytes(require(ZOTERO_FIXTURE).read_bytes()[:20_000])  # real binary data
    capsys.readouterr()
    rc = main(["check", str(binary), "--store", str(store)])
    err = capsys.readouterr().err
    assert rc == 2 and f"{binary}: not text (binary data" in err and "not checked" in err


def test_insert_citation_with_a_wrong_paper_id_is_invalid_params_without_traceback(tmp_path: Path) -> None:
    """The real server over its pipes: a non-integer ``paperId``, no ``uri``, a malformed
    ``range`` and a ``plan`` that is no plan are each -32602 with one line naming the argument."""
    from ..lsp.test_lsp_framing import INIT_PARAMS, RawServer, body, frame

    store = tmp_path / "s.sqlite"
    assert main(["index", str(LIBRARY), "--store", str(store), "-q", "--no-embed"]) == 0
    srv = RawServer(tmp_path)
    try:
        srv.ask(1, "initialize", INIT_PARAMS)
        srv.send(frame(body(None, "initialized", {})))
        end = time.monotonic() + 60
        while not srv.ask(2, "workspace/executeCommand", {"command": "citewise.status"})["result"]["ready"]:
            assert time.monotonic() < end, "the store never opened"
            time.sleep(0.2)
        uri = (tmp_path / "d.tex").as_uri()
        bad = {
            "paperId": {"uri": uri, "paperId": "abc"},
            "uri": {"paperId": 1},
            "range": {"uri": uri, "paperId": 1, "range": {"start": 3}},
            "plan": {"plan": [1, 2]},
        }
        for n, (name, args) in enumerate(bad.items(), start=10):
            answer = srv.ask(
                n, "workspace/executeCommand", {"command": "citewise.insertCitation", "arguments": [args]}
            )
            error = answer["error"]
            assert error["code"] == -32602 and f"'{name}'" in error["message"], answer
            assert "data" not in error and "Traceback" not in json.dumps(answer)
    finally:
        srv.finish()


def test_no_error_response_carries_a_traceback() -> None:
    """Whatever still fails inside a handler: the response keeps pygls's one-line message, its
    traceback goes to the server's log."""
    from citewise.server.lsp import create_server

    server = create_server()
    protocol = server.protocol
    sent = io.BytesIO()
    protocol.set_writer(sent, include_headers=False)
    try:
        raise KeyError("paperId")
    except KeyError:
        error = JsonRpcInternalError.of(sys.exc_info()).to_response_error()
    assert "traceback" in error.data  # what pygls puts in
    protocol._send_response(7, None, error)
    answer = json.loads(sent.getvalue())
    assert answer["error"]["code"] == -32603 and answer["error"]["message"] == "KeyError: 'paperId'"
    assert "data" not in answer["error"]
