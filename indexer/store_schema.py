"""The store's SQL schema and its migrations (kept apart from the store's logic in store.py).

``MIGRATIONS[i]`` brings a store from schema version i to i + 1; a new version appends one and
bumps ``SCHEMA_VERSION``. Stores of a newer version are refused, older ones upgraded on open.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from .packed_text import pack

SCHEMA_VERSION = 3

# Each migration brings the schema from version i to i + 1 (index 0: empty file -> version 1).
MIGRATIONS: list[str] = [
    """
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE papers (
        id INTEGER PRIMARY KEY,
        uid TEXT NOT NULL UNIQUE,
        key TEXT NOT NULL DEFAULT '',
        doi TEXT NOT NULL DEFAULT '',
        arxiv TEXT NOT NULL DEFAULT '',
        acl_id TEXT NOT NULL DEFAULT '',
        title TEXT NOT NULL DEFAULT '',
        abstract TEXT NOT NULL DEFAULT '',
        authors TEXT NOT NULL DEFAULT '[]',
        year INTEGER,
        venue TEXT NOT NULL DEFAULT '',
        entry_type TEXT NOT NULL DEFAULT '',
        keywords TEXT NOT NULL DEFAULT '',
        bibtex TEXT NOT NULL DEFAULT '',
        extra TEXT NOT NULL DEFAULT '{}',
        source TEXT NOT NULL DEFAULT '',
        source_line INTEGER NOT NULL DEFAULT 0,
        content_hash TEXT NOT NULL DEFAULT '',
        norm_title TEXT NOT NULL DEFAULT '',
        updated_at REAL NOT NULL DEFAULT 0
    );
    CREATE INDEX papers_doi ON papers(doi);
    CREATE INDEX papers_arxiv ON papers(arxiv);
    CREATE INDEX papers_acl ON papers(acl_id);
    CREATE INDEX papers_title_year ON papers(norm_title, year);
    CREATE INDEX papers_key ON papers(key);
    CREATE TABLE paper_sources (
        paper_id INTEGER NOT NULL REFERENCES papers(id) ON DELETE CASCADE,
        source TEXT NOT NULL,
        key TEXT NOT NULL DEFAULT '',
        line INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (source, paper_id)
    ) WITHOUT ROWID;
    CREATE INDEX paper_sources_paper ON paper_sources(paper_id);
    CREATE TABLE sources (
        path TEXT PRIMARY KEY,
        format TEXT NOT NULL,
        mtime REAL NOT NULL DEFAULT 0,
        size INTEGER NOT NULL DEFAULT 0,
        imported_at REAL NOT NULL DEFAULT 0,
        papers INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE citations (
        citing INTEGER NOT NULL REFERENCES papers(id) ON DELETE CASCADE,
        cited_ref TEXT NOT NULL,
        cited INTEGER,
        PRIMARY KEY (citing, cited_ref)
    ) WITHOUT ROWID;
    CREATE INDEX citations_cited ON citations(cited);
    CREATE INDEX citations_ref ON citations(cited_ref);
    CREATE VIRTUAL TABLE papers_fts USING fts5(
        title, abstract, keywords, authors,
        content='papers', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER papers_ai AFTER INSERT ON papers BEGIN
        INSERT INTO papers_fts(rowid, title, abstract, keywords, authors)
        VALUES (new.id, new.title, new.abstract, new.keywords, new.authors);
    END;
    CREATE TRIGGER papers_ad AFTER DELETE ON papers BEGIN
        INSERT INTO papers_fts(papers_fts, rowid, title, abstract, keywords, authors)
        VALUES ('delete', old.id, old.title, old.abstract, old.keywords, old.authors);
    END;
    CREATE TRIGGER papers_au AFTER UPDATE OF title, abstract, keywords, authors ON papers BEGIN
        INSERT INTO papers_fts(papers_fts, rowid, title, abstract, keywords, authors)
        VALUES ('delete', old.id, old.title, old.abstract, old.keywords, old.authors);
        INSERT INTO papers_fts(rowid, title, abstract, keywords, authors)
        VALUES (new.id, new.title, new.abstract, new.keywords, new.authors);
    END;
    """,
    # 1 -> 2: the full-text index holds titles, keywords and authors only (the title/author
    # search is all that uses it; the abstracts' terms were most of its 64 MB on ACM-CR), and
    # rows' BibTeX and extras are packed (see packed_text.py and repack_rows below).
    """
    DROP TRIGGER IF EXISTS papers_ai;
    DROP TRIGGER IF EXISTS papers_ad;
    DROP TRIGGER IF EXISTS papers_au;
    DROP TABLE IF EXISTS papers_fts;
    CREATE VIRTUAL TABLE papers_fts USING fts5(
        title, keywords, authors,
        content='papers', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER papers_ai AFTER INSERT ON papers BEGIN
        INSERT INTO papers_fts(rowid, title, keywords, authors)
        VALUES (new.id, new.title, new.keywords, new.authors);
    END;
    CREATE TRIGGER papers_ad AFTER DELETE ON papers BEGIN
        INSERT INTO papers_fts(papers_fts, rowid, title, keywords, authors)
        VALUES ('delete', old.id, old.title, old.keywords, old.authors);
    END;
    CREATE TRIGGER papers_au AFTER UPDATE OF title, keywords, authors ON papers BEGIN
        INSERT INTO papers_fts(papers_fts, rowid, title, keywords, authors)
        VALUES ('delete', old.id, old.title, old.keywords, old.authors);
        INSERT INTO papers_fts(rowid, title, keywords, authors)
        VALUES (new.id, new.title, new.keywords, new.authors);
    END;
    INSERT INTO papers_fts(papers_fts) VALUES ('rebuild');
    """,
    # 2 -> 3: finding "the same entry of the same source" (a re-imported .bib or JSON Lines file)
    # scanned all of the source's rows without this index: quadratic, 49 s for one 20k-record file.
    """
    CREATE INDEX IF NOT EXISTS paper_sources_key ON paper_sources(source, key);
    """,
]


def pack_extra(extra: dict) -> bytes | str:
    """A row's ``extra`` column: ``'{}'`` when empty (cheap, and readable as is), packed JSON else."""
    return pack(json.dumps(extra, ensure_ascii=False)) if extra else "{}"


def repack_rows(conn: sqlite3.Connection, batch: int = 2000) -> int:
    """Pack the BibTeX and extras of rows written as plain text (stores made before version 2).

    Runs inside the migration's transaction, so a store is either all upgraded or untouched.
    Returns the number of rows packed.
    """
    done = 0
    last = 0
    while True:
        rows = conn.execute(
            "SELECT id, title, abstract, bibtex, extra FROM papers "
            "WHERE id > ? AND ((typeof(bibtex) = 'text' AND bibtex != '') OR (typeof(extra) = 'text' AND extra != '{}')) "
            "ORDER BY id LIMIT ?",
            (last, batch),
        ).fetchall()
        if not rows:
            return done
        updates = []
        for pid, title, abstract, bibtex, extra in rows:
            new_bib = pack(bibtex, title, abstract) if isinstance(bibtex, str) else bibtex
            new_extra = pack_extra(json.loads(extra)) if isinstance(extra, str) else extra
            updates.append((new_bib, new_extra, pid))
        conn.executemany("UPDATE papers SET bibtex=?, extra=? WHERE id=?", updates)
        done += len(rows)
        last = rows[-1][0]


# Python steps run after the SQL of the migration with the same index, in its transaction.
PY_MIGRATIONS: dict[int, Callable[[sqlite3.Connection], object]] = {1: repack_rows}


def split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies (which contain ';') whole."""
    statements: list[str] = []
    buf: list[str] = []
    in_trigger = False
    for line in script.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        buf.append(line)
        upper = stripped.upper()
        if upper.startswith("CREATE TRIGGER"):
            in_trigger = True
        if in_trigger:
            if upper == "END;":
                statements.append("\n".join(buf))
                buf = []
                in_trigger = False
        elif stripped.endswith(";"):
            statements.append("\n".join(buf))
            buf = []
    if buf:
        statements.append("\n".join(buf))
    return statements
