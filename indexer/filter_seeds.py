"""The library behind ``citewise index --around LIBRARY``: its papers' ids (the seeds), and what a
store already knows about them.

Why apart from ``filters.py``: this is the part that reads files and databases; the filter itself
stays pure. A library is whatever the user keeps their papers in: a ``.bib`` (or a folder of
them), a ``zotero.sqlite``, a citewise store, or any file ``citewise index`` reads. Its papers'
DOIs, arXiv ids, Anthology ids and open-source ids (OpenAlex, S2 corpus id...) are the seeds;
their titles (four words or more) name them where a ``.bib`` entry has no id; the papers they
cite (a store keeps references, and so do JSON Lines or OpenAlex records) are one hop away.

Before an import, :func:`learn_from_store` reads the store being filled: the ids its copies of the
library's papers have there (a paper imported from S2AG before carries its corpus id, which S2AG
citation rows name it by), the papers they cite, and the citation rows with a seed at one end. So
what one ``--around`` import learned late (a citation row read after the papers file) is known to
the next run of the same command.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from citewise.errors import CitewiseError

from .filters import Neighbourhood, record_refs, title_key
from .importer import ImportError_, expand_sources, iter_records
from .records import PaperRecord
from .store import Store

_SQLITE_MAGIC = b"SQLite format 3\x00"


class LibraryError(CitewiseError):
    """The ``--around`` library cannot be read or holds no paper to start from."""


def is_citewise_store(path: Path) -> bool:
    """Whether ``path`` is a citewise store (an SQLite file with its ``papers`` and ``sources``)."""
    try:
        with open(path, "rb") as fh:
            if fh.read(len(_SQLITE_MAGIC)) != _SQLITE_MAGIC:
                return False
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return {"papers", "sources", "meta"} <= _tables(conn)
        finally:
            conn.close()
    except (OSError, sqlite3.DatabaseError):
        return False


def load_library(path: str | Path) -> Neighbourhood:
    """The seeds of ``--around path``; raises :class:`LibraryError` naming what is wrong."""
    path = Path(path).expanduser()
    if not path.exists():
        raise LibraryError(f"--around {path}: no such file or folder")
    if path.is_file() and is_citewise_store(path):
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            around = _from_store(conn)
        except sqlite3.DatabaseError as exc:
            raise LibraryError(f"--around {path}: cannot read the store ({exc})") from None
        finally:
            conn.close()
        papers = "papers"
    else:
        around, papers = _from_files(path)
    if not around.seeds and not around.titles:
        raise LibraryError(
            f"--around {path}: none of its {papers} has a DOI, an arXiv id or a title of four words or "
            "more to find it by"
        )
    return around


def library_files(path: Path) -> list[tuple[Path, str]]:
    """The library files (and their formats) ``--around PATH`` names; :class:`LibraryError` when
    there are none or one cannot be read (``citewise index --around`` and ``citewise fetch --around``)."""
    try:
        files = expand_sources([path])
    except ImportError_ as exc:
        raise LibraryError(f"--around: {exc}") from None
    if not files:
        raise LibraryError(f"--around {path}: no library files in it (.bib, zotero.sqlite, a citewise store)")
    return files


def _from_files(path: Path) -> tuple[Neighbourhood, str]:
    around = Neighbourhood()
    files = library_files(path)
    count = 0
    for file, fmt in files:
        for item in iter_records(file, fmt):
            if isinstance(item, PaperRecord):
                count += 1
                _add_paper(around, item)
    return around, f"{count} papers"


def _add_paper(around: Neighbourhood, record: PaperRecord) -> None:
    around.seeds.update(record_refs(record))
    if key := title_key(record.title):
        around.titles.add(key)
    around.near.update(record.references)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _from_store(conn: sqlite3.Connection) -> Neighbourhood:
    """Every paper of a citewise store is a seed; what they cite and what cites them is near."""
    around = Neighbourhood()
    for doi, arxiv, acl_id, norm_title in conn.execute("SELECT doi, arxiv, acl_id, norm_title FROM papers"):
        around.seeds.update(x for x in (doi, arxiv, acl_id) if x)
        if norm_title and norm_title.count(" ") + 1 >= 4:
            around.titles.add(norm_title)
    tables = _tables(conn)
    if "paper_ids" in tables:
        around.seeds.update(ref for (ref,) in conn.execute("SELECT ref FROM paper_ids"))
    around.near.update(ref for (ref,) in conn.execute("SELECT DISTINCT cited_ref FROM citations"))
    if "citation_edges" in tables:
        _near_by_edges(conn, around)
    around.near -= around.seeds
    return around


def _near_by_edges(conn: sqlite3.Connection, around: Neighbourhood) -> None:
    """The other end of every stored citation row with a seed at one end."""
    with _temp_refs(conn, "around_seeds", around.seeds):
        rows = conn.execute(
            "SELECT citing_ref, cited_ref FROM citation_edges WHERE citing_ref IN temp.around_seeds "
            "OR cited_ref IN temp.around_seeds"
        )
        for citing, cited in rows:
            around.near.add(cited if citing in around.seeds else citing)


class _temp_refs:
    """A temporary one-column table of values (refs, or paper ids: no column type, so each keeps
    its own and the indexes on the joined columns are used) for set-based queries; dropped on exit."""

    def __init__(self, conn: sqlite3.Connection, name: str, values: Iterable[str | int]) -> None:
        self.conn, self.name, self.values = conn, name, values

    def __enter__(self) -> None:
        self.conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {self.name} (v PRIMARY KEY)")
        self.conn.execute(f"DELETE FROM temp.{self.name}")
        self.conn.executemany(
            f"INSERT OR IGNORE INTO temp.{self.name}(v) VALUES (?)", ((v,) for v in self.values)
        )

    def __exit__(self, *exc: object) -> None:
        self.conn.execute(f"DROP TABLE IF EXISTS temp.{self.name}")


def learn_from_store(store: Store, around: Neighbourhood) -> None:
    """What the store being filled knows about the library's papers, added to ``around``: the
    other ids of its copies of them, the papers those cite, and the citation rows with a seed at
    one end (read before the import: nothing here is written)."""
    conn = store.conn
    with _temp_refs(conn, "around_seeds", around.seeds), _temp_refs(conn, "around_titles", around.titles):
        pids = {
            pid
            for sql in (
                "SELECT id FROM papers WHERE doi IN temp.around_seeds",
                "SELECT id FROM papers WHERE arxiv IN temp.around_seeds",
                "SELECT id FROM papers WHERE acl_id IN temp.around_seeds",
                "SELECT paper_id FROM paper_ids WHERE ref IN temp.around_seeds",
                "SELECT id FROM papers WHERE norm_title IN temp.around_titles",
            )
            for (pid,) in conn.execute(sql)
        }
    if pids:
        with _temp_refs(conn, "around_papers", pids):
            for row in conn.execute("SELECT doi, arxiv, acl_id FROM papers WHERE id IN temp.around_papers"):
                around.seeds.update(x for x in row if x)
            sqls = (
                "SELECT ref FROM paper_ids WHERE paper_id IN temp.around_papers",
                "SELECT cited_ref FROM citations WHERE citing IN temp.around_papers",
            )
            around.seeds.update(ref for (ref,) in conn.execute(sqls[0]))
            around.near.update(ref for (ref,) in conn.execute(sqls[1]))
    if "citation_edges" in _tables(conn):
        _near_by_edges(conn, around)
    around.near -= around.seeds
