"""Fuzzing the open-source importers (OpenAlex, S2AG, arXiv, Crossref, S2ORC) with bad records and
damaged files, as the bad-input report's cases did by hand.

For real records of each format (the first 12 of each sample), hypothesis mutates one record
(a field of the wrong JSON kind, a value nested thousands deep, a field of hundreds of kilobytes),
cuts the file short as text, or compresses it (gzip, zstd) and cuts the archive short. Properties:

- nothing escapes but one clear refusal (``ImportError_``: one line, no traceback);
- the store stays whole: SQLite's integrity check, every source's recorded count equals the papers
  it holds;
- every problem names the file and a line inside it, in one line;
- never a silent half-import: a mutated record is imported or named by its line, and every other
  record is imported (the papers are exactly those of the other records, or one more); a file cut
  short as text keeps exactly the records of its complete lines; a cut archive ends with an
  ``incomplete`` problem whose line follows the records kept, and never keeps more records than
  the archive's readable part holds.

The budget is bounded (``FUZZ``: a few dozen examples a test, no deadline): the module runs in
about 20 s on an idle core.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import tempfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citewise.indexer.importer import ImportError_, import_sources
from citewise.indexer.records import ImportProblem
from citewise.indexer.store import Store

from ..conftest import SHARED_DATA

SAMPLES = SHARED_DATA / "samples"
FILES = {
    "openalex": SAMPLES / "openalex" / "works_api_page_peneira_2024.json",
    "s2ag-papers": SAMPLES / "s2ag" / "papers" / "papers-sample.jsonl",
    "arxiv": SAMPLES / "arxiv" / "arxiv-metadata-oai-snapshot.first200.jsonl",
    "crossref": SAMPLES / "crossref" / "works_query_ecology_boettiger_20items.jsonl",
    "s2orc": SAMPLES / "s2orc" / "metadata_sample_v2020-07-05.jsonl",
}
RECORDS = 12
FUZZ = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

pytestmark = pytest.mark.skipif(
    not all(p.exists() for p in FILES.values()), reason=f"the real samples are not in {SAMPLES}"
)


def _rows(fmt: str) -> list[dict]:
    path = FILES[fmt]
    if fmt == "openalex":
        return json.loads(path.read_text(encoding="utf-8"))["results"][:RECORDS]
    lines = path.read_text(encoding="utf-8").splitlines()[:RECORDS]
    return [json.loads(line) for line in lines]


ROWS = {fmt: _rows(fmt) for fmt in FILES} if all(p.exists() for p in FILES.values()) else {}
formats = st.sampled_from(sorted(FILES))


def _text(rows: list[Any]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def _import(
    data: bytes, name: str, lines: int | None = None
) -> tuple[dict[str, Any], list[ImportProblem], str]:
    """Import ``data`` (written as ``name``, holding ``lines`` lines once decompressed) into a
    fresh store; the stats' counts, the problems, the refusal's message (or '') and checks of the
    store's wholeness."""
    with tempfile.TemporaryDirectory(prefix="citewise-fuzz-") as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        store = Store(Path(tmp) / "s.sqlite")
        try:
            stats = import_sources(store, [path])
        except ImportError_ as exc:
            message = str(exc)
            assert "\n" not in message and "Traceback" not in message and message
            assert store.count() == 0
            return {"papers": 0, "kept": 0}, [], message
        try:
            _assert_whole(store.conn)
            papers = store.count()
        finally:
            store.close()
    for p in stats.problems:
        assert p.source == str(path), p
        assert 0 <= p.line <= (data.count(b"\n") if lines is None else lines) + 1, p
        assert "\n" not in p.message and "Traceback" not in p.message, p
    kept = stats.imported + stats.updated + stats.unchanged + stats.duplicates
    return {"papers": papers, "kept": kept}, stats.problems, ""


def _assert_whole(conn: sqlite3.Connection) -> None:
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    for path, papers in conn.execute("SELECT path, papers FROM sources").fetchall():
        held = conn.execute("SELECT count(*) FROM paper_sources WHERE source=?", (path,)).fetchone()[0]
        assert held == papers, f"{path}: {held} papers held, {papers} recorded"


def _papers_of(rows: list[Any]) -> int:
    return _import(_text(rows), "ref.jsonl")[0]["papers"] if rows else 0


# -- one record made bad ---------------------------------------------------------------------------
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=30)
)
wrong_kinds = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _nested(depth: int, kind: str) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value] if kind == "list" else {"x": value}
    return value


bad_values = st.one_of(
    wrong_kinds,
    st.builds(_nested, st.integers(50, 5000), st.sampled_from(["list", "dict"])),
    st.builds(
        lambda n, ch: ch * n, st.integers(5_000, 600_000), st.sampled_from(["a", "é", "\x00", " ", "\u202e"])
    ),
)


@FUZZ
@given(fmt=formats, data=st.data(), value=bad_values)
def test_one_bad_record_is_imported_or_named_and_the_others_import(
    fmt: str, data: st.DataObject, value: Any
) -> None:
    rows = [dict(r) for r in ROWS[fmt]]
    at = data.draw(st.integers(0, len(rows) - 1), label="record")
    field = data.draw(st.sampled_from(sorted(rows[at])), label="field")
    rows[at][field] = value
    try:
        text = _text(rows)
    except (ValueError, RecursionError):  # a value json.dumps itself refuses: not a file anyone has
        return
    got, problems, refused = _import(text, f"{fmt}.jsonl")
    others = _papers_of(rows[:at] + rows[at + 1 :])
    if refused:  # refused whole: only when the format could not be told at all
        assert others == 0 or "format" in refused, refused
        return
    assert got["papers"] in (others, others + 1), (got, others, problems)
    if got["papers"] == others:
        assert any(p.line == at + 1 for p in problems), (field, problems)
    assert all(p.line == at + 1 for p in problems if not p.skipped), problems


# -- a file cut short --------------------------------------------------------------------------
@FUZZ
@given(fmt=formats, data=st.data())
def test_a_text_file_cut_short_keeps_exactly_its_complete_lines(fmt: str, data: st.DataObject) -> None:
    text = _text(ROWS[fmt])
    cut = data.draw(st.integers(1, len(text) - 1), label="cut at byte")
    got, problems, refused = _import(text[:cut], f"{fmt}.jsonl")
    complete = text[:cut].count(b"\n")
    tail = text[:cut].rsplit(b"\n", 1)[-1]
    if tail and _parses(tail):  # cut just before the last newline: the last record is whole
        complete += 1
    expected = _papers_of(ROWS[fmt][:complete])
    if refused:
        assert expected == 0 and complete == 0, refused
        return
    assert got["papers"] == expected, (got, expected, problems)
    if not text[:cut].endswith(b"\n") and not _parses(tail):
        assert [p.line for p in problems if not p.skipped] == [complete + 1], problems


def _parses(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True


def _compress(kind: str, text: bytes) -> bytes:
    if kind == "gz":
        return gzip.compress(text, compresslevel=6)
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdCompressor(level=3).compress(text)


def _readable_lines(kind: str, archive: bytes) -> int:
    """Complete lines in the readable part of a cut archive (what a streaming reader can get)."""
    if kind == "gz":
        out = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(archive)
    else:
        import zstandard

        out = zstandard.ZstdDecompressor().decompressobj().decompress(archive)
    return out.count(b"\n")


@FUZZ
@given(fmt=formats, kind=st.sampled_from(["gz", "zst"]), data=st.data())
def test_a_cut_archive_is_reported_incomplete_with_what_was_kept(
    fmt: str, kind: str, data: st.DataObject
) -> None:
    archive = _compress(kind, _text(ROWS[fmt]))
    cut = data.draw(st.integers(1, len(archive) - 1), label="cut at byte")
    got, problems, refused = _import(archive[:cut], f"{fmt}.jsonl.{kind}", lines=RECORDS)
    readable = _readable_lines(kind, archive[:cut])
    if refused:
        assert readable < RECORDS and ("cut short" in refused or "format" in refused), refused
        return
    ends = [p for p in problems if p.incomplete]
    assert len(ends) == 1, problems  # said, not silent
    assert got["papers"] == got["kept"] <= readable
    assert ends[0].line >= got["kept"], (ends[0], got)
