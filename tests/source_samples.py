"""Helpers for the open-source importer tests (tests/indexer/test_sources_*.py): where the real samples are
(``shared/data/samples``, skipped with a message when absent), reading and writing JSON Lines, and
finding a stored paper by any of its ids."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from citewise.indexer.store import Store

from .conftest import SHARED_DATA, require

SAMPLES = SHARED_DATA / "samples"


def sample(*parts: str) -> Path:
    """A file or folder of the real samples; the test is skipped when it is not on this machine."""
    return require(SAMPLES.joinpath(*parts))


def read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[Any], *, gz: bool = False) -> Path:
    """``rows`` one a line (each a JSON value, or a raw string written as it is)."""
    text = "".join(
        (row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n" for row in rows
    )
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def paper_by_ref(store: Store, ref: str) -> int | None:
    """The stored paper that ``ref`` names (an open-source id, a DOI, an arXiv id)."""
    row = store.conn.execute(
        "SELECT paper_id FROM paper_ids WHERE ref=? UNION SELECT id FROM papers WHERE doi=? OR arxiv=?",
        (ref, ref, ref),
    ).fetchall()
    assert len(row) <= 1, f"{ref} names {len(row)} papers"
    return row[0][0] if row else None


def refs_of(store: Store, pid: int) -> set[str]:
    """Every open-source id the paper answers to."""
    return {r for (r,) in store.conn.execute("SELECT ref FROM paper_ids WHERE paper_id=?", (pid,))}


def edges(store: Store, source: Path | None = None) -> list[tuple[str, str, str, str, int | None]]:
    """(citing, cited, context, intents, influential) of the imported edges, in file order."""
    sql = "SELECT citing_ref, cited_ref, context, intents, influential FROM citation_edges"
    args: tuple = ()
    if source is not None:
        sql += " WHERE source=?"
        args = (str(source.resolve()),)
    return store.conn.execute(sql + " ORDER BY rowid", args).fetchall()
