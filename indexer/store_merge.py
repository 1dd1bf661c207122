"""How one imported record becomes a paper row: matching it to a paper the store already has
(Anthology id, DOI, arXiv id, the same entry of the same source, normalised title + year, stable
id), inserting, updating or merging it, and detaching papers from a source.

Why apart from :mod:`citewise.indexer.store`: the store owns connections, transactions and reading;
the merge rules are one job with their own tests' worth of cases (cross-listed Anthology papers,
DOIs shared by mistake, duplicates within one ACM file). Every function works inside the caller's
transaction (``conn``) and commits nothing.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field

from .packed_text import pack
from .records import ImportProblem, PaperRecord, normalize_doi, normalize_title
from .store_ids import bridge, fill_missing, find_by_ids, link_ids
from .store_schema import pack_extra

# The papers columns of identifiers that a source's record may give (see ``given``).
_ID_COLUMNS = ("doi", "arxiv", "acl_id")
# A reference that is a DOI (bare, doi:, or a doi.org URL): stored normalised, so it resolves.
_DOI_REF = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)?10\.\d{4,9}/", re.I)


@dataclass
class ImportStats:
    """What one import did: the summary the CLI prints and the tests compare."""

    imported: int = 0  # new papers
    updated: int = 0  # existing papers whose content changed
    unchanged: int = 0
    duplicates: int = 0  # records merged into a paper already in the store
    skipped: int = 0  # records deliberately not imported (e.g. ACM "Session Details")
    broken: int = 0  # records that could not be parsed (reported with file and line)
    removed: int = 0  # papers dropped because their source no longer holds them
    problems: list[ImportProblem] = field(default_factory=list)

    def add(self, other: ImportStats) -> None:
        for name in ("imported", "updated", "unchanged", "duplicates", "skipped", "broken", "removed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems.extend(other.problems)

    def count_outcome(self, outcome: str) -> bool:
        """Count one record's upsert outcome; returns whether it changed the store (a new or
        updated paper), which decides whether the store's generation is bumped."""
        if outcome == "imported":
            self.imported += 1
            return True
        if outcome == "updated":
            self.updated += 1
            return True
        if outcome == "duplicate":
            self.duplicates += 1
        else:
            self.unchanged += 1
        return False

    def as_dict(self) -> dict[str, int]:
        return {
            name: getattr(self, name)
            for name in ("imported", "updated", "unchanged", "duplicates", "skipped", "broken", "removed")
        }


def find_existing(conn: sqlite3.Connection, rec: PaperRecord) -> int | None:
    pid = match(conn, rec)
    if pid is not None and rec.acl_id:
        # Two Anthology ids are two papers, even where the metadata collide (cross-listed
        # papers share title and year; a few share a DOI by mistake).
        row = conn.execute("SELECT acl_id FROM papers WHERE id=?", (pid,)).fetchone()
        if row and row[0] and row[0] != rec.acl_id:
            return None
    return pid


def match(conn: sqlite3.Connection, rec: PaperRecord) -> int | None:
    if rec.acl_id:
        # An Anthology id names one paper: looked up first, since a few Anthology papers share
        # a DOI by mistake (J10-1006 and J10-1008), and the DOI would find the other one.
        row = conn.execute("SELECT id FROM papers WHERE acl_id=? LIMIT 1", (rec.acl_id,)).fetchone()
        if row:
            return row[0]
    if rec.doi:
        row = conn.execute("SELECT id FROM papers WHERE doi=? LIMIT 1", (rec.doi,)).fetchone()
        if row:
            return row[0]
    if rec.arxiv:
        row = conn.execute("SELECT id FROM papers WHERE arxiv=? LIMIT 1", (rec.arxiv,)).fetchone()
        if row:
            return row[0]
    if rec.ids and (pid := find_by_ids(conn, rec.ids)) is not None:
        return pid  # an OpenAlex / S2 / MAG / PubMed id the paper was stored with
    if rec.acl_id:
        row = conn.execute("SELECT id FROM papers WHERE acl_id=? LIMIT 1", (rec.acl_id,)).fetchone()
        return row[0] if row else None  # a new Anthology id is a new paper
    if rec.key and rec.source:
        # The same entry of the same source, edited (e.g. a title fixed in the user's .bib).
        row = conn.execute(
            "SELECT paper_id FROM paper_sources WHERE source=? AND key=? LIMIT 1", (rec.source, rec.key)
        ).fetchone()
        if row:
            return row[0]
    nt = normalize_title(rec.title)
    if nt and len(nt) > 12:
        # Same normalised title and year, and no conflicting DOI: the same work.
        row = conn.execute(
            "SELECT id, doi FROM papers WHERE norm_title=? AND year IS ? LIMIT 1", (nt, rec.year)
        ).fetchone()
        if row and (not rec.doi or not row[1]):
            return row[0]
    if rec.doi or rec.arxiv or rec.ids:
        return None  # those identifiers are the stable id, and were looked up above
    row = conn.execute("SELECT id FROM papers WHERE uid=?", (rec.stable_id(),)).fetchone()
    return row[0] if row else None


def upsert(conn: sqlite3.Connection, rec: PaperRecord, seen: set[int], now: float) -> tuple[str, int]:
    """Store one record: a new paper, an update of the paper it matches, or a duplicate merged
    into it; the record's ids of the open sources are linked to the paper whatever the outcome."""
    outcome, pid = _upsert(conn, rec, seen, now)
    if rec.ids:
        link_ids(conn, pid, rec.ids)
    return outcome, pid


def _upsert(conn: sqlite3.Connection, rec: PaperRecord, seen: set[int], now: float) -> tuple[str, int]:
    chash = rec.content_hash()
    pid = find_existing(conn, rec)
    if pid is not None:
        bridge(conn, rec, pid, seen)  # other stored papers that this record shows to be the same
    values = paper_values(rec, chash, now)
    if pid is None:
        uid = rec.stable_id()
        if conn.execute("SELECT 1 FROM papers WHERE uid=?", (uid,)).fetchone():
            # A distinct paper whose identifiers collide (e.g. two Anthology papers sharing a DOI).
            uid = f"acl:{rec.acl_id}" if rec.acl_id else f"{uid}#{chash[:12]}"
        cur = conn.execute(
            "INSERT INTO papers(key, doi, arxiv, acl_id, title, abstract, authors, year, venue, entry_type, "
            "keywords, bibtex, extra, source, source_line, content_hash, norm_title, updated_at, uid) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*values, uid),
        )
        pid = cur.lastrowid
        assert pid is not None, "an INSERT into a rowid table sets lastrowid"
        link(conn, pid, rec)
        set_references(conn, pid, rec, replace=False)  # a new row cites nothing yet
        return "imported", pid
    if pid in seen:
        # A second record of the same work within this source (ACM files repeat some DOIs).
        fill_missing(conn, pid, rec)
        return "duplicate", pid
    owner = conn.execute("SELECT source, content_hash FROM papers WHERE id=?", (pid,)).fetchone()
    link(conn, pid, rec)
    if (
        owner[0] != rec.source
        and conn.execute(
            "SELECT 1 FROM paper_sources WHERE paper_id=? AND source=?", (pid, owner[0])
        ).fetchone()
    ):
        # Held by another source too: that source stays the owner; we only fill gaps.
        fill_missing(conn, pid, rec)
        set_references(conn, pid, rec, replace=False)
        return "duplicate", pid
    if owner[1] == chash:
        if owner[0] != rec.source:
            conn.execute(
                "UPDATE papers SET source=?, source_line=? WHERE id=?", (rec.source, rec.source_line, pid)
            )
        return "unchanged", pid
    conn.execute(
        "UPDATE papers SET key=?, doi=?, arxiv=?, acl_id=?, title=?, abstract=?, authors=?, year=?, venue=?, "
        "entry_type=?, keywords=?, bibtex=?, extra=?, source=?, source_line=?, content_hash=?, norm_title=?, "
        "updated_at=? WHERE id=?",
        (*values, pid),
    )
    set_references(conn, pid, rec)
    return "updated", pid


def paper_values(rec: PaperRecord, chash: str, now: float) -> tuple:
    """A record's ``papers`` columns (key ... updated_at), in the order that both the INSERT and
    the UPDATE of :func:`upsert` list them: one tuple for both, so a new paper and an updated
    one are stored from the same values."""
    return (
        rec.key,
        rec.doi,
        rec.arxiv,
        rec.acl_id,
        rec.title,
        rec.abstract,
        json.dumps(rec.authors, ensure_ascii=False),
        rec.year,
        rec.venue,
        rec.entry_type,
        rec.keywords,
        pack(rec.bibtex, rec.title, rec.abstract),
        pack_extra(rec.extra),
        rec.source,
        rec.source_line,
        chash,
        normalize_title(rec.title),
        now,
    )


def given(rec: PaperRecord) -> str:
    """What ``rec`` gives of a paper's identifiers, as ``paper_sources.given`` keeps it per source:
    the DOI, arXiv and Anthology ids and the open sources' ids it has (``'{}'``: none), so that a
    dropped source's own identifiers leave the papers that other sources keep (:func:`detach`)."""
    out: dict[str, object] = {name: value for name in _ID_COLUMNS if (value := getattr(rec, name))}
    if rec.ids:
        out["ids"] = sorted(rec.ids)
    return json.dumps(out, separators=(",", ":"))


def link(conn: sqlite3.Connection, pid: int, rec: PaperRecord) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO paper_sources(paper_id, source, key, line, given) VALUES (?, ?, ?, ?, ?)",
        (pid, rec.source, rec.key, rec.source_line, given(rec)),
    )


def set_references(conn: sqlite3.Connection, pid: int, rec: PaperRecord, replace: bool = True) -> None:
    if replace:
        conn.execute("DELETE FROM citations WHERE citing=?", (pid,))
    refs = (ref.strip() for ref in rec.references)
    conn.executemany(  # one call for all (an OpenAlex work cites ~20-50 works)
        "INSERT OR IGNORE INTO citations(citing, cited_ref, cited) VALUES (?, ?, NULL)",
        [(pid, normalize_doi(ref) if _DOI_REF.match(ref) else ref) for ref in refs if ref],
    )


def detach(conn: sqlite3.Connection, source: str, pids: list[int]) -> int:
    """Take ``source`` off the papers ``pids``: a paper no other source holds is deleted; one that
    another source keeps loses what only ``source`` gave (:func:`_take_back`). Returns how many
    papers were deleted."""
    removed = 0
    for pid in pids:
        dropped = conn.execute(
            "SELECT key, given FROM paper_sources WHERE source=? AND paper_id=?", (source, pid)
        ).fetchone()
        conn.execute("DELETE FROM paper_sources WHERE source=? AND paper_id=?", (source, pid))
        rest = conn.execute(
            "SELECT source, key, line, given FROM paper_sources WHERE paper_id=? ORDER BY source", (pid,)
        ).fetchall()
        if not rest:
            conn.execute("UPDATE citations SET cited=NULL WHERE cited=?", (pid,))
            conn.execute("DELETE FROM papers WHERE id=?", (pid,))
            removed += 1
            continue
        owner = conn.execute("SELECT source FROM papers WHERE id=?", (pid,)).fetchone()[0]
        if owner == source:
            _new_owner(conn, pid, rest)
        if dropped is not None:
            _take_back(conn, pid, dropped, [r for r in rest if r[0] == owner] + rest)
    return removed


def _new_owner(conn: sqlite3.Connection, pid: int, rest: list[tuple]) -> None:
    """The paper's owner was dropped: the first source left owns it. Its text (title, authors...)
    is the dropped source's until the new owner's file is imported again, so that file is marked
    as changed (its next ``citewise index`` rewrites the row from its own record), and the
    BibTeX entry, which only a ``.bib`` gives and never a second source, goes now."""
    source, _key, line, _given = rest[0]
    conn.execute(
        "UPDATE papers SET source=?, source_line=?, content_hash='', bibtex='' WHERE id=?",
        (source, line, pid),
    )
    conn.execute("UPDATE sources SET mtime=0 WHERE path=?", (source,))


def _take_back(conn: sqlite3.Connection, pid: int, dropped: tuple[str, str], rest: list[tuple]) -> None:
    """Remove from a kept paper what only the dropped source gave: its key (each source's key is
    kept per source), and its DOI, arXiv and Anthology ids and open-source ids (``given``), each
    replaced by what the remaining sources give (the owner's first) or emptied. A remaining
    source imported before the store kept ``given`` (``''``) may have given anything: then the
    ids stay, as does everything where the dropped source's own ``given`` is unknown."""
    key, dropped_given = dropped
    keys = [r[1] for r in rest]
    if key and key not in keys:
        conn.execute(
            "UPDATE papers SET key=? WHERE id=? AND key=?", (next((k for k in keys if k), ""), pid, key)
        )
    if not dropped_given or any(not r[3] for r in rest):
        return
    gone = json.loads(dropped_given)
    kept = [json.loads(r[3]) for r in rest]
    for column in _ID_COLUMNS:
        if gone.get(column) and all(g.get(column) != gone[column] for g in kept):
            value = next((g[column] for g in kept if g.get(column)), "")
            conn.execute(
                f"UPDATE papers SET {column}=? WHERE id=? AND {column}=?", (value, pid, gone[column])
            )
    refs = set(gone.get("ids", ())) - {ref for g in kept for ref in g.get("ids", ())}
    conn.executemany("DELETE FROM paper_ids WHERE ref=? AND paper_id=?", [(ref, pid) for ref in sorted(refs)])
