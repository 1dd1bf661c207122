"""The store's SQL schema and its migrations (kept apart from the store's logic in store.py).

``MIGRATIONS[i]`` brings a store from schema version i to i + 1; a new version appends one and
bumps ``SCHEMA_VERSION``. Stores of a newer version are refused, older ones upgraded on open.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from .packed_text import pack

SCHEMA_VERSION = 7

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
    # 3 -> 4 (issue 25, the open sources): every id a paper has beyond DOI / arXiv / Anthology id
    # (OpenAlex, S2 corpus id, MAG, PubMed...: indexer/sources/ids.py), so citations by those ids
    # resolve and records of two sources merge; abstracts that arrive apart from their papers
    # (S2AG's ``abstracts`` dataset), kept by the paper's ref until (and after) the paper arrives;
    # and the intents and influence of imported citing sentences (the Python step below).
    """
    CREATE TABLE IF NOT EXISTS paper_ids (
        ref TEXT PRIMARY KEY,
        paper_id INTEGER NOT NULL REFERENCES papers(id) ON DELETE CASCADE
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS paper_ids_paper ON paper_ids(paper_id);
    CREATE TABLE IF NOT EXISTS source_abstracts (
        ref TEXT NOT NULL,
        source TEXT NOT NULL,
        line INTEGER NOT NULL DEFAULT 0,
        abstract TEXT NOT NULL,
        UNIQUE (ref, source)
    );
    CREATE INDEX IF NOT EXISTS source_abstracts_source ON source_abstracts(source);
    """,
    # 4 -> 5: a draft's bibliography belongs to its draft. Earlier servers imported every workspace
    # .bib into the shared store; the Python step moves those out (indexer/workspace_sources.py)
    # and records what moved, for `citewise info`.
    """
    CREATE TABLE IF NOT EXISTS moved_sources (
        path TEXT PRIMARY KEY,
        papers INTEGER NOT NULL DEFAULT 0,
        removed INTEGER NOT NULL DEFAULT 0,
        moved_at REAL NOT NULL DEFAULT 0,
        reason TEXT NOT NULL DEFAULT ''
    );
    """,
    # 5 -> 6: `citewise fetch` remembers how far it got (indexer/fetch/state.py): one row a task
    # (a library paper to resolve, a paper's references or citing papers to page through), written
    # in the transaction of the page it describes, so a killed fetch resumes where it stopped.
    """
    CREATE TABLE IF NOT EXISTS fetch_state (
        task TEXT PRIMARY KEY,
        cursor TEXT NOT NULL DEFAULT '',
        done INTEGER NOT NULL DEFAULT 0,
        items INTEGER NOT NULL DEFAULT 0,
        result TEXT NOT NULL DEFAULT '',
        updated_at REAL NOT NULL DEFAULT 0
    );
    """,
    # 6 -> 7: what each source's record gave of a paper's identifiers (DOI, arXiv and Anthology
    # ids, the open sources' ids: store_merge.given), so that dropping a source takes away what
    # only it gave (a merged paper kept the dropped source's arXiv id and OpenAlex id before).
    # '' on rows written before: unknown, and then kept on a drop. A Python step
    # (add_given_column): SQLite has no ADD COLUMN IF NOT EXISTS.
    "",
]

# The citation-edge columns that version 4 added; ``citation_edges`` itself is created by the first
# citation import (indexer/citations.py), so a store that never had one gets them from there.
EDGE_COLUMNS_V4 = (("intents", "TEXT NOT NULL DEFAULT ''"), ("influential", "INTEGER"))


# Extras shorter than this stay plain JSON: deflate saves a few dozen bytes on them, and setting
# up its compressor cost 140 us a record, most of an OpenAlex or arXiv record's import budget.
_PACK_EXTRA_FROM = 160


def pack_extra(extra: dict) -> bytes | str:
    """A row's ``extra`` column: ``'{}'`` when empty (cheap, and readable as is), plain JSON when
    short, packed JSON else (``unpack`` reads both)."""
    if not extra:
        return "{}"
    text = json.dumps(extra, ensure_ascii=False)
    return text if len(text) < _PACK_EXTRA_FROM else pack(text)


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


def add_edge_columns(conn: sqlite3.Connection) -> None:
    """Give an existing ``citation_edges`` table the version-4 columns (intents, influential)."""
    if not conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='citation_edges'"
    ).fetchone():
        return
    have = {row[1] for row in conn.execute("PRAGMA table_info(citation_edges)")}
    for name, decl in EDGE_COLUMNS_V4:
        if name not in have:
            conn.execute(f"ALTER TABLE citation_edges ADD COLUMN {name} {decl}")


def add_given_column(conn: sqlite3.Connection) -> None:
    """Schema 7's ``paper_sources.given`` column, unless the table has it already."""
    if "given" not in {row[1] for row in conn.execute("PRAGMA table_info(paper_sources)")}:
        conn.execute("ALTER TABLE paper_sources ADD COLUMN given TEXT NOT NULL DEFAULT ''")


# Python steps run after the SQL of the migration with the same index, in its transaction.
# Schema 5's step, ``workspace_sources.move_workspace_bibliographies``, is added by store.py: it
# uses the store's merge helpers, which import this module.
PY_MIGRATIONS: dict[int, Callable[[sqlite3.Connection], object]] = {
    1: repack_rows,
    3: add_edge_columns,
    6: add_given_column,
}


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
