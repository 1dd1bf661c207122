"""Reading the dumps (indexer/sources/stream.py): the fast JSON decoder gives exactly what the
standard library gives, or defers to it, and a damaged gzip stream (now inflated by ISA-L) ends
the file with a problem at the line reached, after the lines before it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from citewise.indexer.importer import import_sources
from citewise.indexer.sources.stream import iter_json, loads
from citewise.indexer.store import Store

from ..source_samples import sample

VALUES = [
    b'{"a": [1, 2.5, null, true, "\\u00e9\\n"], "a": {"dup": "last wins"}}',
    b"123456789012345678901234567890",  # past 64 bits: still an int (orjson makes it a float)
    b"-9223372036854775809",
    b"0.1",
    b"5e-324",
    b"1.7976931348623157e308",
    b"-0.0",
    b"NaN",  # not JSON, but the standard library reads it, so the importers did
    b"1e400",
    b'"\\ud800"',  # a lone surrogate
    b'"\\u0000"',
    '{"utf16": 1}'.encode("utf-16"),
]


@pytest.mark.parametrize("raw", VALUES)
def test_loads_is_json_loads(raw: bytes) -> None:
    got, want = loads(raw), json.loads(raw)
    assert repr(got) == repr(want) and type(got) is type(want)


@pytest.mark.parametrize("raw", [b"[1,]", b'{"a" 1}', b'"a\x01b"', b"{broken"])
def test_bad_json_gets_the_standard_librarys_message(raw: bytes) -> None:
    with pytest.raises(json.JSONDecodeError) as ours:
        loads(raw)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(raw)
    assert str(ours.value) == str(theirs.value)


def test_not_utf8_is_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n"\xff"\n{"b": 2}\n')
    items = list(iter_json(path))
    assert items[0] == (1, {"a": 1}) and items[2] == (3, {"b": 2})
    assert items[1].line == 2 and items[1].message.startswith("not UTF-8 (byte 2")


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_gzip_part_keeps_the_works_before_the_damage(tmp_path: Path, damage: str) -> None:
    works = json.loads(sample("openalex", "works_api_page_peneira_2024.json").read_text(encoding="utf-8"))
    blob = gzip.compress("".join(json.dumps(w) + "\n" for w in works["results"]).encode(), compresslevel=1)
    # Cut or garble the last part of the stream: the works in the first part still decompress.
    cut = len(blob) * 3 // 4
    broken = blob[:cut] if damage == "truncated" else blob[:cut] + bytes(b ^ 0x5A for b in blob[cut:])
    path = tmp_path / "0000_part_00.gz"
    path.write_bytes(broken)
    stats = import_sources(Store(tmp_path / "s.sqlite"), [path], fmt="openalex")
    assert 10 < stats.imported < 49
    assert len(stats.problems) == 1 and stats.problems[0].message.startswith("cannot read")
    assert stats.problems[0].line == stats.imported + 1


def test_a_big_file_among_small_ones_is_streamed_not_parsed_whole_by_a_worker(
    tmp_path: Path, monkeypatch
) -> None:
    """The import's worker pool hands back a whole file's records at once, so a file over
    ``POOL_MAX_BYTES`` beside others is streamed record by record in the importing process (its
    records are a generator, not a list a worker built), in the files' order; the store is the
    same as a one-process import's."""
    import types

    from citewise.indexer import importer

    files = []
    for i in range(3):
        f = tmp_path / f"part{i}.jsonl"
        rows = [
            {"id": f"p{i}-{j}", "title": f"Paper {j} of part {i}", "year": 2000 + j}
            for j in range(20 + 30 * (i == 1))
        ]
        f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        files.append((f, "jsonl"))
    monkeypatch.setattr(importer, "POOL_MAX_BYTES", files[1][0].stat().st_size - 1)
    streams = list(importer._parsed_stream(files, workers=1))
    assert [p for p, _, _ in streams] == [p for p, _ in files]
    kinds = [isinstance(recs, types.GeneratorType) for _, _, recs in streams]
    assert kinds == [False, True, False]
    assert [len(list(recs)) for _, _, recs in streams] == [20, 50, 20]
    pooled, alone = Store(tmp_path / "a.sqlite"), Store(tmp_path / "b.sqlite")
    import_sources(pooled, [str(f) for f, _ in files], workers=1)
    import_sources(alone, [str(f) for f, _ in files], workers=0)
    titles = "SELECT title FROM papers ORDER BY title"
    assert pooled.conn.execute(titles).fetchall() == alone.conn.execute(titles).fetchall()
    assert pooled.count() == 90
