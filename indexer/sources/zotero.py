"""A Zotero library, read from its database (``zotero.sqlite``), as paper records with the user's
Better BibTeX citation keys.

Why the database and not an export: an exported ``.bib`` is stale from the next item the user
adds, and keeping it current is a standing complaint of Better BibTeX users. The database is read
without writing it, safely while Zotero runs (:mod:`.zotero_db`).

What an item becomes: a :class:`~citewise.indexer.records.PaperRecord` with title, creators in
order ("Last, First", or the single-field name), year from ``date``, venue, DOI, arXiv id, URL,
abstract, the item type as a BibTeX type and the citation key, taken in this order: Zotero 7's own
``citationKey`` field; the older Better BibTeX ``better-bibtex.sqlite`` beside the database (table
``citationkey``); a ``Citation Key: ...`` line in Extra. The key is the record's ``key`` (so a draft
citing it finds the paper) and ``extra["bibtex_key"]``, the preferred key of the BibTeX writer
(:func:`~citewise.indexer.bibtex_keys.make_key`), so an inserted entry is written under it. Notes,
attachments, annotations, items in the trash and feed items are left out. Each item carries
``zotero:<library>:<item key>`` as an id, so an edited item (title, DOI, key) updates its paper.

A paper that another source already holds stays that source's (the store's merge rules), but its
preferred key becomes the user's Zotero key (:func:`claim_keys`), and goes back when the item
leaves the library.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..packed_text import unpack
from ..records import ImportProblem, PaperRecord, count_skips
from ..store import ImportStats, Store
from ..store_schema import pack_extra
from .zotero_db import ZoteroError, read_consistent, schema_problem

FORMAT = "zotero"
BBT_DATABASE = "better-bibtex.sqlite"
_COLLECTION_META = "zotero_collection:"  # store meta: the collection a Zotero source was filtered by
_NOT_PAPERS = ("note", "attachment", "annotation")
_TITLE_FIELDS = ("title", "caseName", "nameOfAct", "subject")
NO_TITLE_SKIP = "items without a title"  # why an item is skipped, in the import summary's words
_VENUE_FIELDS = (
    "publicationTitle",
    "proceedingsTitle",
    "bookTitle",
    "conferenceName",
    "encyclopediaTitle",
    "dictionaryTitle",
    "university",
    "institution",
    "websiteTitle",
    "blogTitle",
    "forumTitle",
    "repository",
)
# Zotero fields kept as BibTeX fields of a built entry (``extra``), under their BibTeX names.
_EXTRA_FIELDS = {
    "volume": "volume",
    "issue": "number",
    "reportNumber": "number",
    "pages": "pages",
    "publisher": "publisher",
    "place": "address",
    "ISBN": "isbn",
    "ISSN": "issn",
    "series": "series",
    "edition": "edition",
    "url": "url",
}
_BIBTEX_TYPES = {
    "journalArticle": "article",
    "magazineArticle": "article",
    "newspaperArticle": "article",
    "book": "book",
    "bookSection": "incollection",
    "encyclopediaArticle": "incollection",
    "dictionaryEntry": "incollection",
    "conferencePaper": "inproceedings",
    "thesis": "phdthesis",
    "report": "techreport",
    "manuscript": "unpublished",
}
_EXTRA_LINE = re.compile(r"^\s{0,10}([A-Za-z][A-Za-z .]{0,40}?)\s{0,5}:\s{0,5}(\S.{0,500}?)\s*$")
_SQL_DATE = re.compile(r"(\d{4})-\d\d-\d\d")
_ANY_YEAR = re.compile(r"(?<!\d)(1[5-9]\d\d|20\d\d)(?!\d)")
_RICH_TEXT = re.compile(r"</?(?:i|b|sup|sub|sc|span)(?:\s[^<>]{0,200})?>", re.I)
_ARXIV_URL = re.compile(r"arxiv\.org/(?:abs|pdf)/([^\s?#]{1,64}?)(?:\.pdf)?(?:[?#]|$)", re.I)


@dataclass
class Creator:
    """One creator of an item, in the item's order."""

    first: str
    last: str
    single_field: bool
    role: str

    def name(self) -> str:
        """The name as records keep names ("Last, First"); a single-field name (an institution) as is."""
        if self.single_field or not self.first:
            return self.last.strip()
        return f"{self.last.strip()}, {self.first.strip()}"


@dataclass
class Item:
    """A regular item of the library, as its tables give it."""

    item_id: int
    library_id: int
    key: str
    type_name: str
    fields: dict[str, str] = field(default_factory=dict)
    creators: list[Creator] = field(default_factory=list)


@dataclass
class Library:
    """What one read of the database gives: the items, and the keys of Better BibTeX's own table."""

    items: list[Item]
    primary_roles: dict[str, str]  # item type -> its primary creator type (author, inventor...)
    legacy_keys: dict[tuple[int, str], str]  # (library id, item key) -> citation key


# -- reading ---------------------------------------------------------------------------------------
def read_library(path: Path, collection: str = "") -> Library:
    """The library's items (of ``collection`` and its subcollections, when given), read safely
    (:func:`.zotero_db.read_consistent`); raises :class:`ZoteroError` saying why it cannot."""

    def read(conn: sqlite3.Connection) -> Library:
        if (problem := schema_problem(conn)) is not None:
            raise ZoteroError(problem)
        items = _items(conn, _collection_ids(conn, collection) if collection else None)
        _attach_fields(conn, items)
        _attach_creators(conn, items)
        return Library(list(items.values()), _primary_roles(conn), {})

    library = read_consistent(path, read)
    library.legacy_keys = legacy_keys(path.parent / BBT_DATABASE)
    return library


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone()
        is not None
    )


def _table(conn: sqlite3.Connection, combined: str, plain: str) -> str:
    """``combined`` where the database has it (Zotero 5.0.x had only ``plain``)."""
    return combined if _has_table(conn, combined) else plain


def _items(conn: sqlite3.Connection, only: set[int] | None) -> dict[int, Item]:
    """Regular items by id: no notes, attachments or annotations, nothing in the trash, nothing
    of a feed library (feed items are news, not the user's papers)."""
    types = _table(conn, "itemTypesCombined", "itemTypes")
    feeds = "AND i.libraryID NOT IN (SELECT libraryID FROM libraries WHERE type='feed')"
    has_libraries = _has_table(conn, "libraries")
    rows = conn.execute(
        f"SELECT i.itemID, i.libraryID, i.key, t.typeName FROM items i "
        f"JOIN {types} t ON t.itemTypeID = i.itemTypeID "
        f"WHERE t.typeName NOT IN ({','.join('?' * len(_NOT_PAPERS))}) "
        f"AND i.itemID NOT IN (SELECT itemID FROM deletedItems) {feeds if has_libraries else ''} "
        "ORDER BY i.itemID",
        _NOT_PAPERS,
    )
    return {
        item_id: Item(item_id, library_id, key, type_name)
        for item_id, library_id, key, type_name in rows
        if only is None or item_id in only
    }


def _attach_fields(conn: sqlite3.Connection, items: dict[int, Item]) -> None:
    fields_table = _table(conn, "fieldsCombined", "fields")
    rows = conn.execute(
        f"SELECT d.itemID, f.fieldName, v.value FROM itemData d JOIN {fields_table} f ON f.fieldID = d.fieldID "
        "JOIN itemDataValues v ON v.valueID = d.valueID"
    )
    for item_id, name, value in rows:
        if (item := items.get(item_id)) is not None and value is not None:
            item.fields[name] = str(value)


def _attach_creators(conn: sqlite3.Connection, items: dict[int, Item]) -> None:
    rows = conn.execute(
        "SELECT ic.itemID, c.firstName, c.lastName, c.fieldMode, t.creatorType FROM itemCreators ic "
        "JOIN creators c ON c.creatorID = ic.creatorID JOIN creatorTypes t ON t.creatorTypeID = ic.creatorTypeID "
        "ORDER BY ic.itemID, ic.orderIndex"
    )
    for item_id, first, last, mode, role in rows:
        if (item := items.get(item_id)) is not None and (last or first):
            item.creators.append(Creator(first or "", last or first or "", mode == 1, role))


def _primary_roles(conn: sqlite3.Connection) -> dict[str, str]:
    """Each item type's primary creator type (``author``; ``inventor`` for patents...)."""
    types = _table(conn, "itemTypesCombined", "itemTypes")
    if not _has_table(conn, "itemTypeCreatorTypes"):
        return {}
    rows = conn.execute(
        f"SELECT t.typeName, c.creatorType FROM itemTypeCreatorTypes x JOIN {types} t ON t.itemTypeID = "
        "x.itemTypeID JOIN creatorTypes c ON c.creatorTypeID = x.creatorTypeID WHERE x.primaryField = 1"
    )
    return dict(rows.fetchall())


def _collection_ids(conn: sqlite3.Connection, name: str) -> set[int]:
    """Ids of the items in every collection called ``name`` and in their subcollections (not
    those in the trash); a name no collection has is a :class:`ZoteroError` listing the names."""
    trash = (
        "SELECT collectionID FROM deletedCollections"
        if _has_table(conn, "deletedCollections")
        else "SELECT 0 WHERE 0"
    )
    alive = f"collectionID NOT IN ({trash})"
    roots = [
        r[0]
        for r in conn.execute(
            f"SELECT collectionID FROM collections WHERE collectionName=? AND {alive}", (name,)
        )
    ]
    if not roots:
        names = sorted({r[0] for r in conn.execute(f"SELECT collectionName FROM collections WHERE {alive}")})
        listed = (", ".join(names[:20]) + (", ..." if len(names) > 20 else "")) if names else "none"
        raise ZoteroError(f"no collection named {name!r} in this Zotero library (its collections: {listed})")
    rows = conn.execute(
        f"WITH RECURSIVE tree(id) AS (SELECT collectionID FROM collections WHERE collectionID IN "
        f"({','.join('?' * len(roots))}) UNION SELECT collectionID FROM collections JOIN tree "
        f"ON parentCollectionID = tree.id WHERE {alive}) "
        "SELECT DISTINCT itemID FROM collectionItems WHERE collectionID IN (SELECT id FROM tree)",
        roots,
    )
    return {r[0] for r in rows}


def legacy_keys(path: Path) -> dict[tuple[int, str], str]:
    """Citation keys of the older Better BibTeX (its own ``better-bibtex.sqlite``, table
    ``citationkey``), by (library id, item key); empty when there is no such file or table."""
    if not path.is_file():
        return {}

    def read(conn: sqlite3.Connection) -> dict[tuple[int, str], str]:
        cols = {r[1] for r in conn.execute("PRAGMA table_info(citationkey)")}
        if not {"libraryID", "itemKey", "citationKey"} <= cols:
            return {}
        rows = conn.execute("SELECT libraryID, itemKey, citationKey FROM citationkey WHERE citationKey != ''")
        return {(int(lib), str(key)): str(cite) for lib, key, cite in rows}

    try:
        return read_consistent(path, read)
    except ZoteroError:
        return {}  # an unreadable key table: the other two places still give keys


# -- items as records ------------------------------------------------------------------------------
def extra_lines(extra: str) -> dict[str, str]:
    """The ``Name: value`` lines of an item's Extra field, by lower-case name (first one wins)."""
    out: dict[str, str] = {}
    for line in extra.splitlines():
        if m := _EXTRA_LINE.match(line):
            out.setdefault(m.group(1).strip().lower(), m.group(2))
    return out


def citation_key(item: Item, legacy: dict[tuple[int, str], str]) -> str:
    """The item's Better BibTeX key: Zotero 7's field, else the older Better BibTeX table, else
    a ``Citation Key:`` line in Extra (``""`` when none has one)."""
    native = item.fields.get("citationKey", "").strip()
    if native:
        return native
    if stored := legacy.get((item.library_id, item.key), "").strip():
        return stored
    return extra_lines(item.fields.get("extra", "")).get("citation key", "").strip()


def year_of(date: str) -> int | None:
    """Zotero stores dates as ``YYYY-MM-DD original text`` (``0000`` where the year is unknown)."""
    m = _SQL_DATE.match(date.strip())
    if m and int(m.group(1)):
        return int(m.group(1))
    m = _ANY_YEAR.search(date)
    return int(m.group(1)) if m else None


def _arxiv(item: Item, notes: dict[str, str]) -> str:
    archive_id = item.fields.get("archiveID", "")
    if archive_id.lower().startswith("arxiv:"):
        return archive_id[6:]
    if notes.get("arxiv"):
        return notes["arxiv"]
    m = _ARXIV_URL.search(item.fields.get("url", ""))
    return m.group(1) if m else ""


def _entry_type(item: Item) -> str:
    if item.type_name == "thesis" and "master" in item.fields.get("thesisType", "").lower():
        return "mastersthesis"
    return _BIBTEX_TYPES.get(item.type_name, "misc")


def _people(item: Item, primary: str) -> tuple[list[str], list[str]]:
    """(authors, editors): the item type's primary creators (authors, if it has none of those)."""
    names = {
        role: [c.name() for c in item.creators if c.role == role] for role in (primary, "author", "editor")
    }
    return names[primary] or names["author"], names["editor"]


def to_record(item: Item, library: Library, source: str) -> PaperRecord | ImportProblem:
    """One item as a paper record (a skip where it has no title: nothing to show or rank)."""
    f = item.fields
    title = _plain(next((f[n] for n in _TITLE_FIELDS if f.get(n, "").strip()), ""))
    if not title:
        return ImportProblem(
            source, item.item_id, f"item {item.key} has no title", skipped=True, reason=NO_TITLE_SKIP
        )
    notes = extra_lines(f.get("extra", ""))
    authors, editors = _people(item, library.primary_roles.get(item.type_name, "author"))
    extra = {bib: f[z].strip() for z, bib in _EXTRA_FIELDS.items() if f.get(z, "").strip()}
    if editors:
        extra["editor"] = " and ".join(editors)
    key = citation_key(item, library.legacy_keys)
    if key:
        extra["bibtex_key"] = key
    return PaperRecord(
        title=title,
        abstract=f.get("abstractNote", "").strip(),
        authors=authors,
        year=year_of(f.get("date", "")),
        venue=_plain(next((f[n] for n in _VENUE_FIELDS if f.get(n, "").strip()), "")),
        entry_type=_entry_type(item),
        key=key,
        doi=f.get("DOI", "") or notes.get("doi", ""),
        arxiv=_arxiv(item, notes),
        source=source,
        source_line=item.item_id,
        extra=extra,
        ids=[f"zotero:{item.library_id}:{item.key}"],
    )


def _plain(text: str) -> str:
    """Zotero's rich text in titles (``<i>``, ``<sup>``, ``<span class="nocase">``) as plain text."""
    return " ".join(_RICH_TEXT.sub("", text).split())


def iter_zotero(path: Path, collection: str = "") -> Iterator[PaperRecord | ImportProblem]:
    """The records of a Zotero database (the importer's reader for ``--format zotero``)."""
    library = read_library(path, collection)
    for item in library.items:
        yield to_record(item, library, str(path))


# -- into the store --------------------------------------------------------------------------------
def import_library(
    store: Store,
    path: Path,
    *,
    collection: str | None = None,
    on_record: Callable[[], None] | None = None,
    skip_reasons: dict[str, int] | None = None,
) -> ImportStats:
    """Import a Zotero database as one source (its papers in one transaction, then the keys in
    another): the store mirrors the library, so an edited item updates its paper and a deleted
    one goes from this source.

    ``collection``: only that collection and its subcollections; ``""`` the whole library;
    ``None`` as the last import of this database chose (a reindex or the language server's watch
    must not widen a filtered import). The user's keys then go to the papers other sources own
    (:func:`claim_keys`). Raises :class:`ZoteroError` where the database cannot be imported.
    ``skip_reasons`` counts the items skipped, by reason (the import summary says why).
    """
    source = str(path)
    meta = _COLLECTION_META + source
    chosen = (store.get_meta(meta) or "") if collection is None else collection
    library = read_library(path, chosen)
    before = held_keys(store, source)
    records: Iterator[PaperRecord | ImportProblem] = (
        to_record(item, library, source) for item in library.items
    )
    if skip_reasons is not None:
        records = count_skips(records, skip_reasons)
    stats = store.import_source(source, records, fmt=FORMAT, on_record=on_record)
    claim_keys(store, source, before)
    if (store.get_meta(meta) or "") != chosen:
        store.set_meta(meta, chosen)
    return stats


def held_keys(store: Store, source: str) -> dict[int, str]:
    """The citation keys ``source`` holds its papers under, by paper id."""
    rows = store.conn.execute(
        "SELECT paper_id, key FROM paper_sources WHERE source=? AND key != ''", (source,)
    )
    return dict(rows.fetchall())


def claim_keys(store: Store, source: str, before: dict[int, str]) -> int:
    """Make the user's Zotero key the preferred BibTeX key of papers that another source owns
    (a paper of a corpus that is also in the library), and take a key back from papers whose
    item left the library or changed its key. Returns how many papers changed.

    Why not through the merge: the store keeps one owner per paper and lets another source only
    fill gaps, but the key a user cites by is theirs, whoever described the paper first. A key
    taken back also clears the row's content hash, so the owner's next import rewrites the row
    with the key of its own (if it has one)."""
    now = held_keys(store, source)
    changed = 0
    with store._transaction() as conn:
        for pid, key in now.items():
            changed += _set_preferred(conn, pid, source, key)
        for pid, key in before.items():
            if now.get(pid) != key:
                changed += _set_preferred(conn, pid, source, None, only_if=key)
    return changed


def _set_preferred(
    conn: sqlite3.Connection, pid: int, source: str, key: str | None, only_if: str | None = None
) -> int:
    """Set (or, with ``key=None``, remove when it is ``only_if``) the preferred key of a paper
    another source owns; returns 1 when the row changed."""
    row = conn.execute("SELECT source, extra FROM papers WHERE id=?", (pid,)).fetchone()
    if row is None or row[0] == source:
        return 0  # gone, or this library's own paper (its record carries the key)
    extra = json.loads(unpack(row[1]))
    current = extra.get("bibtex_key")
    if key is not None and current != key:
        extra["bibtex_key"] = key
        conn.execute("UPDATE papers SET extra=? WHERE id=?", (pack_extra(extra), pid))
        return 1
    if key is None and current == only_if:
        extra.pop("bibtex_key")
        conn.execute("UPDATE papers SET extra=?, content_hash='' WHERE id=?", (pack_extra(extra), pid))
        return 1
    return 0


__all__ = [
    "FORMAT",
    "ZoteroError",
    "claim_keys",
    "import_library",
    "iter_zotero",
    "read_library",
]
