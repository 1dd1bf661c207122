"""The papers ``citewise fetch --around LIBRARY`` starts from: a ``.bib`` (or a folder), a
``zotero.sqlite``, a citewise store, or any file ``citewise index`` reads.

Why apart from ``filter_seeds.py`` (``index --around``): that one gathers sets of ids to filter a
dump by; a fetch needs each paper on its own (its best id for the API, else its title and year,
to match it once and only when unambiguous).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from ..filter_seeds import LibraryError, is_citewise_store, library_files
from ..filters import title_key
from ..importer import iter_records
from ..records import PaperRecord
from ..sources.ids import split_doi

# Which id names a paper best to Semantic Scholar (its own ids first: no lookup on its side).
_PREFERENCE = ("corpusid:", "s2:", "10.", "arxiv", "acl")


@dataclass
class Seed:
    """One library paper: its ids (refs), title and year."""

    refs: list[str] = field(default_factory=list)
    title: str = ""
    year: int | None = None

    @property
    def best(self) -> str:
        """The id to ask S2 by (``""``: none it knows, ask by title)."""
        for kind in _PREFERENCE:
            for ref in self.refs:
                if _kind(ref) == kind:
                    return ref
        return ""

    @property
    def key(self) -> str:
        """The seed's name in ``fetch_state`` (stable between runs of one library)."""
        return self.best or f"title:{title_key(self.title)}"


def _kind(ref: str) -> str:
    if ref.startswith("10."):
        return "10."
    scheme = ref.split(":", 1)[0]
    return {"corpusid": "corpusid:", "s2": "s2:", "arxiv": "arxiv", "acl": "acl"}.get(scheme, "other")


def _seed(record: PaperRecord) -> Seed:
    """A record's ids as S2 can be asked by: DOI, ``arxiv:``, ``acl:``, ``corpusid:``, ``s2:``."""
    refs = [r for r in record.ids if r.startswith(("corpusid:", "s2:"))]
    doi, arxiv = split_doi(record.doi)
    refs += [doi] if doi and not arxiv else []
    refs += [f"arxiv:{a}"] if (a := record.arxiv or arxiv) else []
    refs += [f"acl:{record.acl_id}"] if record.acl_id else []
    return Seed(refs, record.title, record.year)


def load_seeds(path: str | Path) -> list[Seed]:
    """The library's papers, once each (by their best id or title); raises :class:`LibraryError`
    when the library cannot be read or no paper has an id or a title of four words or more."""
    path = Path(path).expanduser()
    if not path.exists():
        raise LibraryError(f"--around {path}: no such file or folder")
    records = _store_records(path) if path.is_file() and is_citewise_store(path) else _file_records(path)
    seeds: dict[str, Seed] = {}
    for record in records:
        seed = _seed(record)
        if seed.best or title_key(seed.title):
            seeds.setdefault(seed.key, seed)
    if not seeds:
        raise LibraryError(
            f"--around {path}: none of its papers has a DOI, an arXiv id, a Semantic Scholar id or a "
            "title of four words or more to find it by"
        )
    return list(seeds.values())


def _file_records(path: Path) -> list[PaperRecord]:
    files = library_files(path)
    return [item for file, fmt in files for item in iter_records(file, fmt) if isinstance(item, PaperRecord)]


def _store_records(path: Path) -> list[PaperRecord]:
    """A store's papers as records (ids from the columns and ``paper_ids``)."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        ids: dict[int, list[str]] = {}
        for pid, ref in conn.execute("SELECT paper_id, ref FROM paper_ids"):
            ids.setdefault(pid, []).append(ref)
        return [
            PaperRecord(title=t, year=y, doi=d, arxiv=a, acl_id=acl, ids=ids.get(pid, []))
            for pid, t, y, d, a, acl in conn.execute("SELECT id, title, year, doi, arxiv, acl_id FROM papers")
        ]
    except sqlite3.DatabaseError as exc:
        raise LibraryError(f"--around {path}: cannot read the store ({exc})") from None
    finally:
        conn.close()
