"""The ids a paper has beyond its DOI, arXiv and Anthology columns (``paper_ids``: OpenAlex, S2
corpus id, MAG, PubMed...), and the merge of two stored papers that one record shows to be the
same work.

Why: the open sources describe the same paper under different ids (arXiv snapshot: the arXiv id
and a journal DOI; S2AG: a corpus id and, sometimes, the arXiv id; OpenAlex: a W id, the DOI, MAG
and PubMed ids), and their citations name papers by their own ids (S2AG citations by corpus id,
OpenAlex by W id). A record whose ids reach two stored papers (an S2AG paper with the DOI of one
and the arXiv id of the other) joins them into one, so the order of imports does not decide how
many papers the store holds. Every function works inside the caller's transaction.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable

from .records import PaperRecord

_CONFLICT_COLUMNS = ("doi", "arxiv", "acl_id")


def find_by_ids(conn: sqlite3.Connection, refs: Iterable[str]) -> int | None:
    """The stored paper that one of ``refs`` (``paper_ids`` refs) names, first found first."""
    for ref in refs:
        row = conn.execute("SELECT paper_id FROM paper_ids WHERE ref=?", (ref,)).fetchone()
        if row:
            return int(row[0])
    return None


def link_ids(conn: sqlite3.Connection, pid: int, refs: Iterable[str]) -> None:
    """Record that ``pid`` answers to ``refs`` (a ref already naming another paper stays there:
    that paper was met first, and :func:`bridge` decides whether the two are one)."""
    conn.executemany(
        "INSERT OR IGNORE INTO paper_ids(ref, paper_id) VALUES (?, ?)", [(ref, pid) for ref in refs]
    )


def _candidates(conn: sqlite3.Connection, rec: PaperRecord) -> set[int]:
    """Every stored paper that one of the record's ids names."""
    found: set[int] = set()
    for column, value in (("doi", rec.doi), ("arxiv", rec.arxiv), ("acl_id", rec.acl_id)):
        if value:
            found.update(r[0] for r in conn.execute(f"SELECT id FROM papers WHERE {column}=?", (value,)))
    for ref in rec.ids:
        row = conn.execute("SELECT paper_id FROM paper_ids WHERE ref=?", (ref,)).fetchone()
        if row:
            found.add(int(row[0]))
    return found


def _compatible(conn: sqlite3.Connection, keep: int, other: int) -> bool:
    """Two papers may be one unless they carry different DOIs, arXiv ids or Anthology ids."""
    rows = conn.execute(
        f"SELECT {', '.join(_CONFLICT_COLUMNS)} FROM papers WHERE id IN (?, ?)", (keep, other)
    ).fetchall()
    if len(rows) != 2:
        return False
    return all(not a or not b or a == b for a, b in zip(rows[0], rows[1], strict=True))


def bridge(conn: sqlite3.Connection, rec: PaperRecord, pid: int, seen: set[int]) -> int:
    """Merge into ``pid`` every other stored paper that the record's ids name and that does not
    conflict with it (different DOIs are different works); returns how many were merged.

    Only records that carry an id of the open sources look further than the first match: the
    BibTeX and Anthology paths keep exactly the matching they had."""
    if not rec.ids:
        return 0
    merged = 0
    for other in sorted(_candidates(conn, rec) - {pid}):
        if _compatible(conn, pid, other):
            merge_into(conn, pid, other)
            seen.discard(other)
            merged += 1
    return merged


def merge_into(conn: sqlite3.Connection, keep: int, gone: int) -> None:
    """Fold paper ``gone`` into ``keep``: its sources, citations (both ways), ids and the fields
    ``keep`` lacks move over, its stable id becomes an id of ``keep``, and ``gone`` is deleted."""
    row = conn.execute(
        "SELECT uid, abstract, keywords, doi, arxiv, acl_id, venue, year FROM papers WHERE id=?", (gone,)
    ).fetchone()
    if row is None:
        return
    uid, abstract, keywords, doi, arxiv, acl_id, venue, year = row
    fill_missing(
        conn,
        keep,
        PaperRecord(
            title="",
            abstract=abstract,
            keywords=keywords,
            doi=doi,
            arxiv=arxiv,
            acl_id=acl_id,
            venue=venue,
            year=year,
        ),
    )
    for table, column in (("paper_sources", "paper_id"), ("citations", "citing"), ("paper_ids", "paper_id")):
        conn.execute(f"UPDATE OR IGNORE {table} SET {column}=? WHERE {column}=?", (keep, gone))
        conn.execute(f"DELETE FROM {table} WHERE {column}=?", (gone,))
    conn.execute("UPDATE citations SET cited=? WHERE cited=?", (keep, gone))
    conn.execute("DELETE FROM papers WHERE id=?", (gone,))
    link_ids(conn, keep, [uid])
    conn.execute("UPDATE papers SET updated_at=? WHERE id=?", (time.time(), keep))


def fill_missing(conn: sqlite3.Connection, pid: int, rec: PaperRecord) -> None:
    """Merge a duplicate: keep what the paper has, take what it lacks."""
    conn.execute(
        "UPDATE papers SET "
        "abstract = CASE WHEN abstract = '' THEN ? ELSE abstract END, "
        "keywords = CASE WHEN keywords = '' THEN ? ELSE keywords END, "
        "doi = CASE WHEN doi = '' THEN ? ELSE doi END, "
        "arxiv = CASE WHEN arxiv = '' THEN ? ELSE arxiv END, "
        "acl_id = CASE WHEN acl_id = '' THEN ? ELSE acl_id END, "
        "venue = CASE WHEN venue = '' THEN ? ELSE venue END, "
        "year = COALESCE(year, ?), "
        "updated_at = CASE WHEN (abstract = '' AND ? != '') OR (keywords = '' AND ? != '') THEN ? "
        "ELSE updated_at END WHERE id = ?",
        (
            rec.abstract,
            rec.keywords,
            rec.doi,
            rec.arxiv,
            rec.acl_id,
            rec.venue,
            rec.year,
            rec.abstract,
            rec.keywords,
            time.time(),
            pid,
        ),
    )
