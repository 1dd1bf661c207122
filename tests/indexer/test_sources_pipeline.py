"""Parsing ahead in a second process (indexer/sources/pipeline.py): the same records as parsing in
this process, and a parser that fails or dies ends the file with a problem, never silently short."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from citewise.indexer.importer import import_sources, iter_records
from citewise.indexer.records import ImportProblem, PaperRecord
from citewise.indexer.sources import pipeline
from citewise.indexer.store import Store

from ..source_samples import read_jsonl, sample, write_jsonl

pytestmark = pytest.mark.skipif(
    (os.cpu_count() or 1) < 2 or not hasattr(os, "fork"), reason="parsing ahead needs two cores and fork"
)


@pytest.fixture()
def snapshot(tmp_path: Path) -> Path:
    rows = read_jsonl(sample("arxiv", "arxiv-metadata-oai-snapshot.first200.jsonl"))
    return write_jsonl(tmp_path / "snapshot.jsonl.gz", rows * 6 + ["{broken"], gz=True)


def test_records_parsed_ahead_are_the_records_parsed_here(snapshot: Path, monkeypatch) -> None:
    here = list(iter_records(snapshot, "arxiv"))
    monkeypatch.setattr(pipeline, "MIN_BYTES", 0)
    ahead = list(pipeline.records_ahead(iter_records, snapshot, "arxiv"))
    assert len(here) == 1201 and ahead == here  # the chunking (500) loses and reorders nothing
    assert isinstance(ahead[-1], ImportProblem) and ahead[-1].line == 1201


def test_an_import_through_the_parser_process(snapshot: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(pipeline, "MIN_BYTES", 0)
    stats = import_sources(Store(tmp_path / "s.sqlite"), [snapshot])
    assert stats.imported == 200 and stats.duplicates == 1000 and [p.line for p in stats.problems] == [1201]


def _failing(path: Path, fmt: str) -> Iterator[PaperRecord]:
    yield from list(iter_records(path, fmt))[:700]
    raise RuntimeError("disk went away")


def _dying(path: Path, fmt: str) -> Iterator[PaperRecord]:
    yield from list(iter_records(path, fmt))[:600]
    os._exit(3)  # killed, as by the OOM killer: no last message


@pytest.mark.parametrize(
    ("read", "message", "kept"),
    [
        (_failing, "RuntimeError: disk went away", (700,)),
        # Killed, it may not have flushed what it had sent: what arrived is kept, the end is a problem.
        (_dying, "the parser process ended, exit code 3", (0, 500, 600)),
    ],
)
def test_a_parser_that_fails_or_dies_ends_the_file_with_a_problem(
    snapshot: Path, monkeypatch, read, message: str, kept: tuple[int, ...]
) -> None:
    monkeypatch.setattr(pipeline, "MIN_BYTES", 0)
    items = list(pipeline.records_ahead(read, snapshot, "arxiv"))
    problem = items[-1]
    assert isinstance(problem, ImportProblem) and message in problem.message
    assert all(isinstance(i, PaperRecord) for i in items[:-1]) and len(items) - 1 in kept
    assert problem.line == (items[-2].source_line if len(items) > 1 else 0)
