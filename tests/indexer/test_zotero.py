"""A Zotero library imported from its database (``zotero.sqlite``), without an export.

The database is built here from Zotero's own schema (``userdata.sql`` and ``system.sql`` in
``../shared/data/samples/zotero``, read, never copied: they are AGPL) and the global schema's item
types and fields, inserted as Zotero inserts them; the items are written into its tables as Zotero
writes them. Better BibTeX's older key database is built from its table definition there.

Covered: what is imported and what is left out (notes, attachments, annotations, the trash, feed
items), the citation keys by precedence, collections as a filter, a re-import after the library
changed, a database of another schema refused in one line, reading while another connection holds
the database's write lock (rollback journal and write-ahead log), ``citewise index`` through the
CLI, the user's key on a paper another source owns, the real Better BibTeX test database where it
is present, and the language server: a Zotero item completed under its key, its entry inserted
under it, and an item added in Zotero suggested without a restart.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from citewise.cli import main
from citewise.indexer.bibtex_keys import make_key
from citewise.indexer.bibtex_writer import bibtex_entry
from citewise.indexer.importer import ImportError_, expand_sources, import_sources
from citewise.indexer.records import PaperRecord
from citewise.indexer.sources.zotero import iter_zotero
from citewise.indexer.store import Store

from ..conftest import SHARED_DATA, require

SAMPLES = SHARED_DATA / "samples" / "zotero"
BBT_FIXTURE = SAMPLES / "zotero_bbt-test-fixture.sqlite"


# -- a zotero.sqlite, built from Zotero's schema ------------------------------------------------------
@dataclass
class Zotero:
    """A Zotero data folder: ``zotero.sqlite`` built from the official schema, items added as
    Zotero adds them (values shared in ``itemDataValues``, creators in ``creators``)."""

    folder: Path
    keys: dict[str, int] = field(default_factory=dict)  # item key -> itemID
    shared: sqlite3.Connection | None = None  # Zotero's own open connection, where a test has one

    @property
    def path(self) -> Path:
        return self.folder / "zotero.sqlite"

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection that commits at the end (the ``shared`` one, else a new one, closed)."""
        conn = self.shared or sqlite3.connect(self.path)
        try:
            with conn:
                yield conn
        finally:
            if conn is not self.shared:
                conn.close()

    def create(self) -> Zotero:
        self.folder.mkdir(parents=True, exist_ok=True)
        userdata = (require(SAMPLES / "userdata.sql")).read_text(encoding="utf-8")
        version = int(userdata.splitlines()[0].lstrip("- "))  # Zotero reads it from the first line
        with self.connect() as conn:
            conn.executescript(userdata)
            conn.executescript((SAMPLES / "system.sql").read_text(encoding="utf-8"))
            global_version = _load_global_schema(conn)
            conn.executemany(
                "INSERT INTO version VALUES (?, ?)", [("userdata", version), ("globalSchema", global_version)]
            )
            conn.execute(
                "INSERT INTO libraries(libraryID, type, editable, filesEditable) VALUES (1, 'user', 1, 1)"
            )
            conn.execute(
                "INSERT INTO libraries(libraryID, type, editable, filesEditable) VALUES (2, 'feed', 0, 0)"
            )
        return self

    def add(
        self,
        key: str,
        item_type: str,
        fields: dict[str, str],
        creators: tuple[tuple[str, str, str], ...] | list[tuple[str, str, str]] = (),
        *,
        library: int = 1,
        parent: str = "",
    ) -> int:
        """An item (``creators``: (first, last, role); an empty first name is a single-field name)."""
        with self.connect() as conn:
            (type_id,) = conn.execute(
                "SELECT itemTypeID FROM itemTypes WHERE typeName=?", (item_type,)
            ).fetchone()
            item_id = conn.execute(
                "INSERT INTO items(itemTypeID, libraryID, key) VALUES (?, ?, ?)", (type_id, library, key)
            ).lastrowid
            for name, value in fields.items():
                _set_field(conn, item_id, name, value)
            for order, (first, last, role) in enumerate(creators):
                _add_creator(conn, item_id, order, first, last, role)
            parent_id = self.keys.get(parent)
            if item_type == "note":
                conn.execute(
                    "INSERT INTO itemNotes VALUES (?, ?, ?, ?)",
                    (item_id, parent_id, fields.get("title", ""), ""),
                )
            elif item_type == "attachment":
                conn.execute(
                    "INSERT INTO itemAttachments(itemID, parentItemID, linkMode) VALUES (?, ?, 1)",
                    (item_id, parent_id),
                )
            elif item_type == "annotation":
                conn.execute(
                    "INSERT INTO itemAnnotations(itemID, parentItemID, type, text, sortIndex, position, isExternal) "
                    "VALUES (?, ?, 1, 'a highlight', '0', '{}', 0)",
                    (item_id, parent_id),
                )
        self.keys[key] = item_id
        return item_id

    def set_field(self, key: str, name: str, value: str) -> None:
        with self.connect() as conn:
            _set_field(conn, self.keys[key], name, value)

    def trash(self, key: str) -> None:
        with self.connect() as conn:
            conn.execute("INSERT INTO deletedItems(itemID) VALUES (?)", (self.keys[key],))

    def collection(self, name: str, keys: list[str], parent: int | None = None) -> int:
        with self.connect() as conn:
            cid = conn.execute(
                "INSERT INTO collections(collectionName, parentCollectionID, libraryID, key) VALUES (?, ?, 1, ?)",
                (name, parent, hashlib.sha1(name.encode()).hexdigest()[:8].upper()),
            ).lastrowid
            conn.executemany(
                "INSERT INTO collectionItems(collectionID, itemID) VALUES (?, ?)",
                [(cid, self.keys[k]) for k in keys],
            )
        return cid

    def legacy_keys(self, keys: dict[str, str]) -> None:
        """Better BibTeX's own ``better-bibtex.sqlite`` beside the database, with its ``citationkey``
        table as BBT defined it (``bbt_citationkey_table_legacy.sql``)."""
        ddl = require(SAMPLES / "bbt_citationkey_table_legacy.sql").read_text(encoding="utf-8")
        conn = sqlite3.connect(":memory:")
        conn.execute("ATTACH DATABASE ? AS betterbibtex", (str(self.folder / "better-bibtex.sqlite"),))
        conn.executescript(ddl)
        conn.executemany(
            "INSERT INTO betterbibtex.citationkey VALUES (?, ?, 1, ?, 0)",
            [(self.keys[k], k, cite) for k, cite in keys.items()],
        )
        conn.commit()
        conn.close()


def _load_global_schema(conn: sqlite3.Connection) -> int:
    """Item types, fields, base-field mappings and creator types from the global schema JSON, into
    the tables Zotero fills from it (the plain and the ``*Combined`` ones)."""
    schema = json.loads((SAMPLES / "zotero-schema_global_schema.json").read_text(encoding="utf-8"))
    fields: dict[str, int] = {}
    creator_types: dict[str, int] = {}

    def field_id(name: str) -> int:
        if name not in fields:
            fields[name] = len(fields) + 1
            conn.execute("INSERT INTO fields VALUES (?, ?, NULL)", (fields[name], name))
            conn.execute("INSERT INTO fieldsCombined VALUES (?, ?, NULL, NULL, 0)", (fields[name], name))
        return fields[name]

    for type_id, item_type in enumerate(schema["itemTypes"], 1):
        conn.execute("INSERT INTO itemTypes VALUES (?, ?, NULL, 1)", (type_id, item_type["itemType"]))
        conn.execute("INSERT INTO itemTypesCombined VALUES (?, ?, 1, 0)", (type_id, item_type["itemType"]))
        for order, f in enumerate(item_type["fields"]):
            fid = field_id(f["field"])
            for table in ("itemTypeFields", "itemTypeFieldsCombined"):
                conn.execute(f"INSERT INTO {table} VALUES (?, ?, NULL, ?)", (type_id, fid, order))
            if "baseField" in f:
                for table in ("baseFieldMappings", "baseFieldMappingsCombined"):
                    conn.execute(
                        f"INSERT INTO {table} VALUES (?, ?, ?)", (type_id, field_id(f["baseField"]), fid)
                    )
        for c in item_type["creatorTypes"]:
            if c["creatorType"] not in creator_types:
                creator_types[c["creatorType"]] = len(creator_types) + 1
                conn.execute(
                    "INSERT INTO creatorTypes VALUES (?, ?)",
                    (creator_types[c["creatorType"]], c["creatorType"]),
                )
            conn.execute(
                "INSERT INTO itemTypeCreatorTypes VALUES (?, ?, ?)",
                (type_id, creator_types[c["creatorType"]], int(bool(c.get("primary")))),
            )
    return int(schema["version"])


def _set_field(conn: sqlite3.Connection, item_id: int, name: str, value: str) -> None:
    (fid,) = conn.execute("SELECT fieldID FROM fieldsCombined WHERE fieldName=?", (name,)).fetchone()
    conn.execute("INSERT OR IGNORE INTO itemDataValues(value) VALUES (?)", (value,))
    (vid,) = conn.execute("SELECT valueID FROM itemDataValues WHERE value=?", (value,)).fetchone()
    conn.execute("INSERT OR REPLACE INTO itemData VALUES (?, ?, ?)", (item_id, fid, vid))


def _add_creator(
    conn: sqlite3.Connection, item_id: int, order: int, first: str, last: str, role: str
) -> None:
    mode = 0 if first else 1
    conn.execute(
        "INSERT OR IGNORE INTO creators(firstName, lastName, fieldMode) VALUES (?, ?, ?)", (first, last, mode)
    )
    (cid,) = conn.execute(
        "SELECT creatorID FROM creators WHERE firstName=? AND lastName=? AND fieldMode=?", (first, last, mode)
    ).fetchone()
    (tid,) = conn.execute("SELECT creatorTypeID FROM creatorTypes WHERE creatorType=?", (role,)).fetchone()
    conn.execute("INSERT INTO itemCreators VALUES (?, ?, ?, ?)", (item_id, cid, tid, order))


GLACIER_ABSTRACT = (
    "Radar interferometry time series show that glacier surges start at the bed, where meltwater "
    "pressure rises, and travel down-glacier as a surge front."
)


def library(folder: Path) -> Zotero:
    """Four papers (keys from the three places, and none), a title-less item, a note, an
    attachment with an annotation, an item in the trash, a feed item; collections Thesis (with the
    subcollection Chapter 2) and Reading."""
    z = Zotero(folder).create()
    z.add(
        "GLAC2019",
        "journalArticle",
        {
            "title": "Glacier Surge Dynamics Observed by <i>Radar</i> Interferometry",
            "abstractNote": GLACIER_ABSTRACT,
            "date": "2019-03-00 March 2019",
            "publicationTitle": "Journal of Glaciology",
            "volume": "65",
            "issue": "250",
            "pages": "201-214",
            "DOI": "10.5555/glacier.surge.2019",
            "citationKey": "okafor2019surge",
            "extra": "Citation Key: okaforExtra",
        },
        [("Chidi", "Okafor", "author"), ("Lena", "Brandt", "author")],
    )
    z.add(
        "CORL2021",
        "conferencePaper",
        {
            "title": "Coral Reef Bleaching Detection from Drone Imagery",
            "date": "2021-07-12",
            "proceedingsTitle": "Proceedings of the Marine Remote Sensing Workshop",
            "extra": "Citation Key: mbekiExtra",
        },
        [("Thabo", "Mbeki", "author"), ("Ana", "Souza", "author"), ("Rui", "Costa", "editor")],
    )
    z.add(
        "PERM2015",
        "bookSection",
        {
            "title": "Permafrost Carbon Feedbacks",
            "date": "2015",
            "bookTitle": "Climate Change and Frozen Ground",
            "extra": "DOI: 10.5555/permafrost.2015\nCitation Key: schuur2015permafrost",
        },
        [("Ted", "Schuur", "author"), ("Ines", "Moreau", "editor")],
    )
    z.add(
        "WMO02022",
        "report",
        {"title": "State of the Global Climate", "date": "2022-00-00 2022", "institution": "WMO"},
        [("", "World Meteorological Organization", "author")],
    )
    z.add("NOTITLE1", "journalArticle", {"date": "2020"})
    z.add("NOTE0001", "note", {})
    z.add("ATTACH01", "attachment", {"title": "Full Text PDF"}, parent="GLAC2019")
    z.add("ANNOT001", "annotation", {}, parent="ATTACH01")
    z.add(
        "TRASHED1", "journalArticle", {"title": "Volcanic Ash Dispersion in the Stratosphere", "date": "2018"}
    )
    z.trash("TRASHED1")
    z.add(
        "FEED0001", "journalArticle", {"title": "Feed News About Tidal Turbines", "date": "2023"}, library=2
    )
    thesis = z.collection("Thesis", ["GLAC2019"])
    z.collection("Chapter 2", ["CORL2021"], parent=thesis)
    z.collection("Reading", ["PERM2015"])
    z.legacy_keys({"GLAC2019": "okaforLegacy", "CORL2021": "Mbeki2021Coral"})
    return z


@pytest.fixture
def zotero(tmp_path: Path) -> Zotero:
    return library(tmp_path / "Zotero")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store" / "papers.sqlite")


def titles(store: Store) -> set[str]:
    return {p.title for p in store.iter_papers()}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- the import ---------------------------------------------------------------------------------------
def test_regular_items_are_imported_and_the_rest_left_out(zotero: Zotero, store: Store) -> None:
    assert expand_sources([zotero.path]) == [(zotero.path.resolve(), "zotero")]  # told by content
    before = digest(zotero.path)
    stats = import_sources(store, [zotero.path])
    assert (stats.imported, stats.skipped, stats.broken) == (4, 1, 0)  # the title-less item skipped
    assert titles(store) == {
        "Glacier Surge Dynamics Observed by Radar Interferometry",
        "Coral Reef Bleaching Detection from Drone Imagery",
        "Permafrost Carbon Feedbacks",
        "State of the Global Climate",
    }  # no note, attachment, annotation, trashed item or feed item
    assert digest(zotero.path) == before  # never written
    glacier = store.find(doi="10.5555/glacier.surge.2019")
    assert glacier is not None
    assert glacier.authors == ["Okafor, Chidi", "Brandt, Lena"]
    assert (glacier.year, glacier.venue, glacier.entry_type) == (2019, "Journal of Glaciology", "article")
    assert glacier.abstract == GLACIER_ABSTRACT
    assert {k: glacier.extra[k] for k in ("volume", "number", "pages")} == {
        "volume": "65",
        "number": "250",
        "pages": "201-214",
    }
    coral = store.find(title="Coral Reef Bleaching Detection from Drone Imagery")
    assert (coral.entry_type, coral.year, coral.authors) == (
        "inproceedings",
        2021,
        ["Mbeki, Thabo", "Souza, Ana"],
    )
    assert (
        coral.venue == "Proceedings of the Marine Remote Sensing Workshop"
        and coral.extra["editor"] == "Costa, Rui"
    )
    permafrost = store.find(title="Permafrost Carbon Feedbacks")
    assert (permafrost.entry_type, permafrost.doi, permafrost.venue) == (
        "incollection",
        "10.5555/permafrost.2015",  # from Extra
        "Climate Change and Frozen Ground",
    )
    wmo = store.find(title="State of the Global Climate")
    assert (wmo.authors, wmo.year, wmo.entry_type) == (
        ["World Meteorological Organization"],
        2022,
        "techreport",
    )


def test_a_preprint_keeps_its_arxiv_id(zotero: Zotero, store: Store) -> None:
    zotero.add(
        "PREP2101",
        "preprint",
        {"title": "Sea Ice Drift from Buoy Tracks", "archiveID": "arXiv:2101.00001", "repository": "arXiv"},
        [("Mia", "Holm", "author")],
    )
    import_sources(store, [zotero.path])
    preprint = store.find(arxiv="2101.00001")
    assert preprint is not None and (preprint.entry_type, preprint.venue) == ("misc", "arXiv")
    assert make_key(preprint) == "holmsea"  # no year, no key: the style's


def test_citation_keys_come_by_precedence_and_become_the_entry_keys(zotero: Zotero, store: Store) -> None:
    """Zotero 7's field over Better BibTeX's old table over Extra; the key is the paper's key in
    the store (a draft citing it finds it) and the key its built entry is written under."""
    import_sources(store, [zotero.path])
    expected = {
        "Glacier Surge Dynamics Observed by Radar Interferometry": "okafor2019surge",  # native field
        "Coral Reef Bleaching Detection from Drone Imagery": "Mbeki2021Coral",  # better-bibtex.sqlite
        "Permafrost Carbon Feedbacks": "schuur2015permafrost",  # Extra
    }
    for title, key in expected.items():
        paper = store.find(key=key)
        assert paper is not None and paper.title == title, key
        assert make_key(paper) == key
        entry_key, entry = bibtex_entry(paper)
        assert entry_key == key and entry.startswith(f"@{paper.entry_type}{{{key},")
        assert "bibtex_key" not in entry
    wmo = store.find(title="State of the Global Climate")
    assert wmo.key == "" and make_key(wmo) == "organization2022state"  # no key anywhere: the style's


def test_collections_filter_with_their_subcollections(zotero: Zotero, store: Store) -> None:
    stats = import_sources(store, [zotero.path], zotero_collection="Thesis")
    assert stats.imported == 2  # Thesis and its subcollection Chapter 2
    assert titles(store) == {
        "Glacier Surge Dynamics Observed by Radar Interferometry",
        "Coral Reef Bleaching Detection from Drone Imagery",
    }
    # A reindex (no filter given) keeps the filter this database was imported with.
    again = import_sources(store, [zotero.path])
    assert (again.imported, again.removed, store.count()) == (0, 0, 2)
    import_sources(store, [zotero.path], zotero_collection="Reading")
    assert titles(store) == {"Permafrost Carbon Feedbacks"}
    import_sources(store, [zotero.path], zotero_collection="")  # the whole library again
    assert store.count() == 4
    with pytest.raises(ImportError_, match=r"no collection named 'Thesys'.*Chapter 2, Reading, Thesis"):
        import_sources(store, [zotero.path], zotero_collection="Thesys")
    assert store.count() == 4


def test_a_reimport_mirrors_the_changed_library(zotero: Zotero, store: Store) -> None:
    import_sources(store, [zotero.path])
    zotero.set_field("GLAC2019", "title", "Glacier Surge Onset Observed by Radar Interferometry")
    zotero.set_field("WMO02022", "title", "State of the Global Climate in 2022")  # no key, no DOI
    zotero.set_field("CORL2021", "citationKey", "mbeki2021coral")  # the user changed the key
    zotero.trash("PERM2015")
    zotero.add("TIDE2024", "journalArticle", {"title": "Tidal Stream Turbine Wakes", "date": "2024"})
    stats = import_sources(store, [zotero.path])
    assert (stats.imported, stats.updated, stats.removed) == (1, 3, 1)
    assert store.find(doi="10.5555/glacier.surge.2019").title.startswith("Glacier Surge Onset")
    assert store.find(key="okafor2019surge") is not None
    assert store.find(key="mbeki2021coral") is not None and store.find(key="Mbeki2021Coral") is None
    assert store.find(title="Permafrost Carbon Feedbacks") is None  # deleted in Zotero
    assert store.count() == 4  # the renamed items updated in place, not added beside the old ones


@pytest.mark.parametrize(
    ("change", "found"),
    [
        ("UPDATE version SET version=40 WHERE schema='userdata'", "userdata schema version 40"),
        ("UPDATE version SET version=512 WHERE schema='userdata'", "userdata schema version 512"),
        ("DROP TABLE itemCreators", "userdata schema version 129) without what citewise reads: itemCreators"),
    ],
)
def test_a_database_of_another_schema_says_which_and_imports_nothing(
    zotero: Zotero, tmp_path: Path, change: str, found: str
) -> None:
    with zotero.connect() as conn:
        conn.execute(change)
    with pytest.raises(ImportError_) as err:
        expand_sources([zotero.path])
    message = str(err.value)
    assert found in message and "nothing imported" in message and "\n" not in message, message
    store_path = tmp_path / "new.sqlite"
    assert main(["index", str(zotero.path), "--store", str(store_path), "-q"]) == 1
    assert not store_path.exists()  # refused before a store was created


def test_read_while_zotero_holds_the_write_lock(zotero: Zotero, store: Store) -> None:
    """Zotero keeps its database locked while it runs: an exclusive transaction with a write in
    progress here. The import reads what was committed, and writes nothing."""
    holder = sqlite3.connect(zotero.path, isolation_level=None, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute(
        "UPDATE itemDataValues SET value='Uncommitted Title' WHERE value='Permafrost Carbon Feedbacks'"
    )
    before = digest(zotero.path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):  # what a plain reader gets
            sqlite3.connect(zotero.path, timeout=0).execute("SELECT count(*) FROM items").fetchone()
        stats = import_sources(store, [zotero.path])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert stats.imported == 4 and "Permafrost Carbon Feedbacks" in titles(store)
    assert digest(zotero.path) == before


def test_commits_still_in_the_write_ahead_log_are_read(zotero: Zotero, store: Store) -> None:
    """A database in WAL mode, locked exclusively, with an item committed to the log but not yet
    to the file: immutable reading would miss it, so a copy of both is read instead."""
    writer = sqlite3.connect(zotero.path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("PRAGMA locking_mode=EXCLUSIVE")
    writer.execute("SELECT count(*) FROM items").fetchone()  # takes the lock
    zotero.shared = writer
    zotero.add("TIDE2024", "journalArticle", {"title": "Tidal Stream Turbine Wakes", "date": "2024"})
    wal = Path(f"{zotero.path}-wal")
    before = digest(zotero.path), digest(wal)
    try:
        stats = import_sources(store, [zotero.path])
        assert (digest(zotero.path), digest(wal)) == before  # neither written (nor checkpointed)
    finally:
        writer.close()
    assert stats.imported == 5 and "Tidal Stream Turbine Wakes" in titles(store)


def test_the_users_key_wins_on_a_paper_another_source_owns(
    zotero: Zotero, store: Store, tmp_path: Path
) -> None:
    """A paper of a corpus imported first stays that source's, but is inserted under the user's
    Zotero key; when the item leaves the library, the key goes back."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        json.dumps(
            {
                "id": "W9",
                "title": "Glacier Surge Dynamics Observed by Radar Interferometry",
                "authors": ["Okafor, Chidi"],
                "year": 2019,
                "doi": "10.5555/glacier.surge.2019",
            }
        )
        + "\n"
    )
    import_sources(store, [corpus])
    stats = import_sources(store, [zotero.path])
    assert (stats.imported, stats.duplicates) == (3, 1)
    paper = store.find(doi="10.5555/glacier.surge.2019")
    assert paper.source == str(corpus.resolve())  # still the corpus's paper
    assert make_key(paper) == "okafor2019surge" and bibtex_entry(paper)[0] == "okafor2019surge"
    zotero.trash("GLAC2019")
    assert import_sources(store, [zotero.path]).removed == 0  # the corpus still holds the paper
    paper = store.find(doi="10.5555/glacier.surge.2019")
    assert "bibtex_key" not in paper.extra and make_key(paper) == "okafor2019glacier"
    again = import_sources(store, [corpus])  # the owner's next import rewrites its row
    assert again.updated == 1 and store.find(doi="10.5555/glacier.surge.2019").key == "W9"


def test_citewise_index_through_the_cli(
    zotero: Zotero, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "cli.sqlite")
    assert (
        main(["index", str(zotero.path), "--store", store, "--json", "-q", "--zotero-collection", "Thesis"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["imported"] == 2
    assert main(["index", str(zotero.path), "--store", store, "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["imported"], summary["unchanged"], summary["skipped"]) == (2, 2, 1)
    assert main(["search", "glacier surge radar", "--store", store, "--json", "-k", "1"]) == 0
    assert "okafor2019surge" in capsys.readouterr().out
    bib = tmp_path / "refs.bib"
    bib.write_text("@article{a, title = {A}, year = 2020}\n")
    assert main(["index", str(bib), "--store", store, "-q", "--zotero-collection", "Thesis"]) == 1
    assert "--zotero-collection filters a Zotero database" in capsys.readouterr().err


def test_the_better_bibtex_test_database() -> None:
    """Better BibTeX's own test profile: a real Zotero database (userdata 125) with native keys."""
    if not BBT_FIXTURE.exists():
        pytest.skip(f"Better BibTeX's fixture database not found at {BBT_FIXTURE}; skipping")
    records = list(iter_zotero(BBT_FIXTURE))
    # Its 54 regular items less the 5 of its feed library (news, not the user's papers); 48 notes,
    # an attachment and an annotation left out.
    assert len(records) == 49
    papers = [r for r in records if isinstance(r, PaperRecord)]
    assert sum(1 for p in papers if p.key) == 49
    assert any(p.key == "shelah1969" for p in papers)
    assert all(re.fullmatch(r"\S+", p.key) for p in papers if p.key)


# -- the language server ------------------------------------------------------------------------------
def latex(body: str) -> str:
    return f"\\documentclass{{article}}\n\\begin{{document}}\n{body}\n\\bibliography{{refs}}\n\\end{{document}}\n"


def offers(key: str):
    return lambda result: any(i.label == key for i in result.items)


@pytest.mark.asyncio
async def test_the_server_completes_zotero_items_under_their_keys_and_follows_the_library(
    tmp_path: Path, zotero: Zotero
) -> None:
    """With the ``zotero`` setting, a Zotero item is completed under its Better BibTeX key and its
    entry inserted under it; an item then added in Zotero is suggested without a restart."""
    from ..lsp_harness import build_store, start, stop

    store = build_store(tmp_path / "store")  # the example library, without the Zotero items
    root = tmp_path / "ws"
    root.mkdir()
    (root / "refs.bib").write_text("@article{own2020,\n  title = {An Entry of My Own},\n  year = 2020\n}\n")
    session = await start(root, store, options={"zotero": str(zotero.path)})
    try:
        uri = session.open(
            "draft.tex", latex("Surges start at the glacier bed as meltwater pressure rises \\cite{}.")
        )
        found = await session.complete_when(uri, "\\cite{", offers("okafor2019surge"), "the Zotero item")
        item = next(i for i in found.items if i.label == "okafor2019surge")
        await session.accept(uri, "\\cite{", item)
        (entry,) = await session.wait_for(lambda: [e for e in session.bib_edits if "@" in e], "the entry")
        assert entry.lstrip().startswith("@article{okafor2019surge,\n"), entry
        assert "Okafor, Chidi and Brandt, Lena" in entry and "10.5555/glacier.surge.2019" in entry
        assert "\\cite{okafor2019surge}" in session.buffers[uri]

        zotero.add(
            "TIDE2024",
            "journalArticle",
            {
                "title": "Wake Recovery Behind Tidal Stream Turbines",
                "abstractNote": "Acoustic Doppler profiles show how the wake behind tidal stream turbines recovers.",
                "date": "2024",
                "citationKey": "ngata2024wake",
            },
            [("Aroha", "Ngata", "author")],
        )
        session.change(uri, latex("The wake behind tidal stream turbines recovers downstream \\cite{}."))
        await session.complete_when(uri, "\\cite{", offers("ngata2024wake"), "the item added in Zotero", 60)
    finally:
        await stop(session)
