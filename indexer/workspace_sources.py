"""Bibliographies that belong to one draft, moved out of the shared store (schema 5).

Why: earlier versions of the language server imported every ``.bib`` of an opened workspace into
the one shared store. A draft's ``.bib`` holds what its author typed, made-up and wrong entries
included; once in the shared store, those entries "confirmed" themselves in another project's
``citewise check``, came back from ``citewise search``, and merged into stored papers' records.
The server now serves a workspace's ``.bib`` entries to that workspace only (an overlay beside
the store, :mod:`citewise.server.bib_overlay`), and this module cleans stores the earlier
versions filled.

Which sources moved: the store never recorded who imported a ``.bib`` (the editor or the user
with ``citewise index``), so the rule reads the file system as the editor did: a ``.bib`` file
that still exists and sits beside a draft (a ``.tex``, ``.qmd``, ``.Rmd`` or Markdown file in its
folder, or a TeX or Quarto file one folder up) was a draft's bibliography. Its papers leave the
shared store unless another source holds them too, and nothing is lost: the file is still there,
the server still serves it to its draft, and ``citewise index FILE`` shares it again on purpose.
A ``.bib`` elsewhere (``~/papers/library.bib``), or one whose file is gone, stays as it was.
``moved_sources`` records what moved, for ``citewise info``.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from .store_merge import detach

# Files that make a folder a draft's: in the .bib's own folder, any of these ...
DRAFT_SUFFIXES = (".tex", ".ltx", ".qmd", ".rmd", ".md", ".markdown")
# ... and one folder up, only these (a home folder's README.md says nothing about ~/papers/).
PARENT_DRAFT_SUFFIXES = (".tex", ".ltx", ".qmd", ".rmd")
_MAX_LISTED = 2000  # entries read from one folder: enough for any project, bounded for any folder

MOVED_REASON = "a draft's bibliography, imported by the editor: now served to its draft only"


def _has_draft(folder: Path, suffixes: tuple[str, ...]) -> bool:
    try:
        with os.scandir(folder) as it:
            for i, entry in enumerate(it):
                if i >= _MAX_LISTED:
                    return False
                if entry.name.lower().endswith(suffixes) and entry.is_file(follow_symlinks=False):
                    return True
    except OSError:
        return False
    return False


def beside_a_draft(path: str | os.PathLike[str]) -> bool:
    """Whether the ``.bib`` at ``path`` exists and sits beside a draft (see the module docstring)."""
    p = Path(path)
    try:
        if not p.is_file():
            return False
    except OSError:
        return False
    folder = p.parent
    return _has_draft(folder, DRAFT_SUFFIXES) or _has_draft(folder.parent, PARENT_DRAFT_SUFFIXES)


def move_workspace_bibliographies(conn: sqlite3.Connection) -> int:
    """Take the drafts' bibliographies out of the shared store (inside the migration's
    transaction, so a store is upgraded whole or not at all); returns the files moved."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS moved_sources (path TEXT PRIMARY KEY, papers INTEGER NOT NULL DEFAULT 0, "
        "removed INTEGER NOT NULL DEFAULT 0, moved_at REAL NOT NULL DEFAULT 0, reason TEXT NOT NULL DEFAULT '')"
    )
    rows = conn.execute("SELECT path FROM sources WHERE format = 'bibtex' ORDER BY path").fetchall()
    moved = 0
    for (path,) in rows:
        if not beside_a_draft(path):
            continue
        pids = [pid for (pid,) in conn.execute("SELECT paper_id FROM paper_sources WHERE source=?", (path,))]
        removed = detach(conn, path, pids)
        conn.execute("DELETE FROM source_abstracts WHERE source=?", (path,))
        conn.execute("DELETE FROM sources WHERE path=?", (path,))
        conn.execute(
            "INSERT OR REPLACE INTO moved_sources(path, papers, removed, moved_at, reason) VALUES (?, ?, ?, ?, ?)",
            (path, len(pids), removed, time.time(), MOVED_REASON),
        )
        moved += 1
    if moved:
        conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='generation'")
    return moved


def moved_sources(conn: sqlite3.Connection) -> list[dict]:
    """What the upgrade moved out of the shared store (path, papers it held, papers removed)."""
    try:
        rows = conn.execute(
            "SELECT path, papers, removed, moved_at FROM moved_sources ORDER BY path"
        ).fetchall()
    except sqlite3.OperationalError:  # a store made before schema 5 and opened read-only
        return []
    return [dict(zip(("path", "papers", "removed", "moved_at"), r, strict=True)) for r in rows]


def forget_moved(conn: sqlite3.Connection, path: str) -> None:
    """The user imported a moved file on purpose (``citewise index FILE``): it is shared again."""
    try:
        conn.execute("DELETE FROM moved_sources WHERE path=?", (path,))
    except sqlite3.OperationalError:
        pass
