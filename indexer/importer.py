"""Import sources (files or folders) into a store: format detection and dispatch.

One function that the CLI, the language server's workspace sync and the evaluation all use, so
every path into the store deduplicates and reports problems the same way.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .citations import CitationEdge
from .filters import ImportFilter, record_refs
from .records import ImportProblem, PaperRecord, count_skips
from .sources.detect import EDGE_READERS
from .sources.detect import FORMATS as SOURCE_FORMATS
from .store import ImportStats, Store

if TYPE_CHECKING:
    from .sources.loading import LoadStats

Row = TypeVar("Row")  # what a reader yields beside its problems: papers, abstracts or edges
FORMATS = ("bibtex", "acl-xml", "jsonl", "citations", *SOURCE_FORMATS, "zotero")
# The user's own library: imported whole, never filtered (the filters are for corpora and dumps).
LIBRARY_FORMATS = ("bibtex", "zotero")
# Formats whose files are not paper records: edges (citations) and abstracts apart from papers.
EDGE_FORMATS = ("citations", *EDGE_READERS)
ABSTRACT_FORMATS = ("s2ag-abstracts",)
# Formats read streaming in this process: their files are dumps (an OpenAlex part, an arXiv
# snapshot) that a parser process would hand back whole.
STREAMED_FORMATS = frozenset(SOURCE_FORMATS)
# What a folder is searched for, as said when it holds none of it.
KINDS_LOOKED_FOR = (
    ".bib (BibTeX), .xml (ACL Anthology), .jsonl/.json (JSON Lines, and the dumps and API pages of "
    "OpenAlex, Semantic Scholar, S2ORC, arXiv, Crossref and unarXive; also as .gz or .zst), .tsv "
    "citation files, and Zotero's zotero.sqlite"
)
_EXTENSIONS = {
    ".bib": "bibtex",
    ".bibtex": "bibtex",
    ".xml": "acl-xml",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".tsv": "citations",
}


@dataclass
class SourceStats(ImportStats):
    """An import's summary, with the citation edges of citation files (``indexer/citations.py``)."""

    citations: int = 0  # citation edges stored
    abstracts: int = 0  # abstracts stored apart from their papers (S2AG abstracts)
    # Text references (Crossref ``unstructured``): matched to a stored paper by title in this
    # import, and those still matching none in the store.
    text_references_matched: int = 0
    text_references_unmatched: int = 0
    filtered: int = 0  # records and citation rows left out by the import filters (indexer/filters.py)
    # ``skipped`` by reason (``ImportProblem.skip_reason``): a bare "3,653 skipped" tells the user
    # nothing; every skip site names its reason, and the summary and ``--json`` count by it.
    skip_reasons: dict[str, int] = field(default_factory=dict)

    def add(self, other: ImportStats) -> None:
        super().add(other)
        for name in ("citations", "abstracts", "text_references_matched", "filtered"):
            setattr(self, name, getattr(self, name) + getattr(other, name, 0))
        self.text_references_unmatched = getattr(
            other, "text_references_unmatched", self.text_references_unmatched
        )
        for reason, n in getattr(other, "skip_reasons", {}).items():
            self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + n

    def as_dict(self) -> dict[str, Any]:
        return {
            **super().as_dict(),
            "citations": self.citations,
            "abstracts": self.abstracts,
            "text_references_matched": self.text_references_matched,
            "text_references_unmatched": self.text_references_unmatched,
            "filtered": self.filtered,
            "skipped_by_reason": dict(sorted(self.skip_reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        }


class ImportError_(Exception):
    """A source the user named cannot be imported (missing file, unknown format)."""


def detect_format(path: Path) -> str | None:
    """Format from the extension, with a peek at the content for ambiguous files: JSON, JSON
    Lines and compressed files (and files without an extension that start like JSON or a gzip
    stream) are first checked against the open sources (indexer/sources/detect.py), which may
    raise ``WrongKind`` for a file of theirs that citewise does not import."""
    from .sources.detect import sniff as sniff_source
    from .sources.zotero_db import sniff as sniff_zotero

    if sniff_zotero(path):  # an SQLite file with Zotero's tables (indexer/sources/zotero.py)
        return "zotero"
    if found := sniff_source(path):
        return found
    name = path.name.lower()
    if name.endswith((".jsonl.gz", ".ndjson.gz", ".json.gz", ".jsonl.zst", ".ndjson.zst", ".json.zst")):
        return "jsonl"
    fmt = _EXTENSIONS.get(path.suffix.lower())
    if path.suffix.lower() == ".json":
        fmt = "jsonl"
    if fmt == "acl-xml":
        with open(path, "rb") as fh:
            head = fh.read(512)
        if b"<collection" not in head:
            return None  # some other XML (e.g. ACL's schema or an unrelated file)
    if fmt in ("jsonl", "citations") and not name.endswith(".gz"):
        # Citing -> cited records (a TSV with that header, JSON objects with those keys).
        from .citations import sniff

        if sniff(path):
            return "citations"
        if fmt == "citations":
            return None  # some other TSV
    return fmt


def expand_sources(paths: list[str | os.PathLike[str]], fmt: str | None = None) -> list[tuple[Path, str]]:
    """Files to import, in a stable order, with their formats. Folders are searched recursively."""
    out: list[tuple[Path, str]] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise ImportError_(f"{path}: no such file or folder")
        if path.is_dir() and not os.access(path, os.R_OK | os.X_OK):
            raise ImportError_(f"{path}: a folder that cannot be read (permission denied); nothing imported")
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            ff = fmt or _detect(f, explicit=not path.is_dir())
            if ff is None:
                if not path.is_dir():
                    raise ImportError_(unknown_format(f))
                continue
            out.append((f.resolve(), ff))
    return out


def _detect(path: Path, explicit: bool) -> str | None:
    """:func:`detect_format`, with the open sources' refusals as user errors: a file of the wrong
    kind named on the command line says what it is (in a folder it is passed over, like a
    README); a ``.zst`` that cannot be read is an error either way."""
    from .sources.detect import WrongKind
    from .sources.stream import StreamError

    try:
        return detect_format(path)
    except WrongKind as exc:
        if explicit:
            raise ImportError_(f"{path}: {exc}") from None
        return None
    except StreamError as exc:
        raise ImportError_(str(exc)) from None


def unknown_format(path: Path) -> str:
    """Why a file named on the command line has no format, as precisely as its first bytes tell:
    empty, unreadable, an SQLite database that is damaged or another program's (or a citewise
    store named as a source), else "unknown format" with the formats ``--format`` takes."""
    from .sources.zotero_db import SQLITE_MAGIC, describe_sqlite

    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        return f"{path}: cannot be read ({exc.strerror or exc})"
    if size == 0:
        return f"{path}: an empty file, nothing to import"
    if head == SQLITE_MAGIC:
        return f"{path}: {describe_sqlite(path)}"
    return f"{path}: unknown format (use --format {'|'.join(FORMATS)})"


def iter_records(path: Path, fmt: str) -> Iterator[PaperRecord | ImportProblem]:
    """The record stream of one source file in the given format."""
    if fmt == "bibtex":
        from .bibtex import iter_bibtex

        return _guarded(path, iter_bibtex(path))
    if fmt == "acl-xml":
        from .acl_xml import iter_acl_xml

        return _guarded(path, iter_acl_xml(str(path)))
    if fmt == "jsonl":
        from .jsonl import iter_jsonl

        return _guarded(path, iter_jsonl(str(path)))
    if fmt == "zotero":
        from .sources.zotero import iter_zotero

        return _guarded(path, iter_zotero(path))
    from .sources.detect import reader

    if (read := reader(fmt)) is not None:
        return _guarded(path, read(path))
    raise ImportError_(f"{path}: unknown format {fmt!r} (one of {', '.join(FORMATS)})")


def _guarded(path: Path, records: Iterator[Row | ImportProblem]) -> Iterator[Row | ImportProblem]:
    """The last line of defence: an importer's unforeseen exception becomes one problem at the
    line it reached (the records before it still import), never a failed import of every file."""
    line = 0
    try:
        for item in records:
            line = item.source_line if isinstance(item, PaperRecord) else getattr(item, "line", line)
            yield item
    except Exception as exc:
        yield ImportProblem(
            str(path), line, f"could not read past this point ({type(exc).__name__}: {exc})", incomplete=True
        )


def _parse_file(job: tuple[Path, str]) -> list[PaperRecord | ImportProblem]:
    """Worker-process side of the import pipeline: one file parsed and cleaned."""
    path, fmt = job
    return list(iter_records(path, fmt))


def _parsed_stream(
    files: list[tuple[Path, str]], workers: int
) -> Iterator[tuple[Path, str, Iterator[PaperRecord | ImportProblem]]]:
    """Files with their record streams; with ``workers`` > 0, parsing runs in other processes.

    Parsing and TeX cleaning are CPU-bound Python; the SQLite writes are too. A small process pool
    parses the next files while this process writes the current one, which is how a 110k-record
    collection imports in well under two minutes on two cores. Memory stays bounded: the pool
    works a few files ahead, and every file is still written in its own transaction. A worker
    hands back a whole file's records at once, so files over ``POOL_MAX_BYTES`` are streamed here
    instead (a 10 GB JSON Lines file beside a folder of XML took 35 MB more a second in the
    worker until the machine ran out of memory).
    """
    small = [_file_bytes(p) <= POOL_MAX_BYTES for p, _ in files]  # decided once: sizes may change
    pooled = [job for job, fits in zip(files, small, strict=True) if fits]
    if workers <= 0 or len(pooled) < 2:
        for path, ff in files:
            yield path, ff, iter_records(path, ff)
        return
    import multiprocessing as mp

    ctx = mp.get_context("spawn" if os.name == "nt" else "fork")
    with ctx.Pool(workers) as pool:
        parsed = pool.imap(_parse_file, pooled, chunksize=1)  # in ``files``' order
        for (path, ff), fits in zip(files, small, strict=True):
            if fits:
                yield path, ff, iter(next(parsed))
            else:
                yield path, ff, iter_records(path, ff)


# Files a worker may parse whole (its records cross to this process as one list); bigger ones are
# streamed record by record in this process. 64 MiB of BibTeX or JSON Lines is ~50k records.
POOL_MAX_BYTES = 64 * 1024 * 1024


def _file_bytes(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # unreadable: the parser reports it as one problem


@dataclass
class _Run:
    """One :func:`import_sources` call: the store, the filter, what the caller is told, and the
    running total."""

    store: Store
    filt: ImportFilter
    on_record: Callable[[], None] | None = None
    on_file: Callable[[Path, ImportStats], None] | None = None
    on_start: Callable[[Path], None] | None = None
    on_bytes: Callable[[Path, int], None] | None = None
    total: SourceStats = field(default_factory=SourceStats)

    def start(self, path: Path) -> None:
        if self.on_start is not None:
            self.on_start(path)

    def report(self, path: Path, stats: ImportStats) -> None:
        self.total.add(stats)
        if self.on_file is not None:
            self.on_file(path, stats)

    def position(self, path: Path) -> Callable[[int], None] | None:
        """What the reader of ``path`` calls with its position in the file (bytes on disk)."""
        on_bytes = self.on_bytes
        return None if on_bytes is None else lambda position: on_bytes(path, position)

    def filters(self, fmt: str) -> bool:
        """Whether this file's records go through the filter: not the user's own library."""
        return self.filt.active and fmt not in LIBRARY_FORMATS


def import_sources(
    store: Store,
    paths: list[str | os.PathLike[str]],
    *,
    fmt: str | None = None,
    skip_current: bool = False,
    on_record: Callable[[], None] | None = None,
    on_file: Callable[[Path, ImportStats], None] | None = None,
    workers: int | None = None,
    zotero_collection: str | None = None,
    filt: ImportFilter | None = None,
    on_start: Callable[[Path], None] | None = None,
    on_bytes: Callable[[Path, int], None] | None = None,
) -> ImportStats:
    """Import every source; each file is its own transaction. Returns the summed statistics.

    ``skip_current`` skips files unchanged (mtime and size) since their last import: what the
    language server uses to pick up ``.bib`` edits cheaply. ``workers`` parser processes (default:
    one when there are many files and more than one core; 0 parses in this process).
    ``zotero_collection`` filters Zotero databases (``""``: whole library; ``None``: as last time).
    ``filt`` (indexer/filters.py) keeps records and citation rows out of the store, except those
    of the user's own library (``LIBRARY_FORMATS``); ``on_start`` is told of each file as its
    import begins, ``on_bytes`` how far into a streamed file (bytes on disk) the reading is.
    """
    run = _Run(store, filt or ImportFilter(), on_record, on_file, on_start, on_bytes)
    files = [
        (p, ff)
        for p, ff in expand_sources(paths, fmt)
        if not (skip_current and store.source_is_current(str(p)))
    ]
    for path in [p for p, ff in files if ff == "zotero"]:
        run.start(path)
        run.report(path, _import_zotero(store, path, zotero_collection, on_record))
    files = [(p, ff) for p, ff in files if ff != "zotero"]
    # Edge files after the papers (their counts and the index touch the papers they cite, and the
    # filters judge a row by its papers); kept abstracts after the papers too (they are given to
    # the papers that lack one).
    edge_files = [(p, ff) for p, ff in files if ff in EDGE_FORMATS]
    abstract_files = [(p, ff) for p, ff in files if ff in ABSTRACT_FORMATS]
    paper_files = [(p, ff) for p, ff in files if ff not in EDGE_FORMATS and ff not in ABSTRACT_FORMATS]
    _import_paper_files(run, paper_files, workers)
    _resolve_after_papers(store, run.total)
    for path, ff in abstract_files:
        run.start(path)
        run.report(path, _import_abstracts(run, path, ff))
    for path, ff in edge_files:
        run.start(path)
        if ff == "citations":
            stats = SourceStats()
            stats.add(import_citations(store, path, on_record, keep=_edge_filter(run, stats)))
        else:
            stats = _import_edges(run, path, ff)
        run.report(path, stats)
    return run.total


def _import_paper_files(run: _Run, files: list[tuple[Path, str]], workers: int | None) -> None:
    """Paper files: many small ones parsed by a pool, dumps parsed ahead one by one."""
    pooled = [(p, ff) for p, ff in files if ff not in STREAMED_FORMATS]
    streamed = [(p, ff) for p, ff in files if ff in STREAMED_FORMATS]
    if workers is None:
        workers = 1 if len(pooled) >= 8 and (os.cpu_count() or 1) > 1 else 0
    from .sources.pipeline import records_ahead  # a dump is parsed ahead in a second process

    in_process = ((p, ff, records_ahead(iter_records, p, ff, run.position(p))) for p, ff in streamed)
    for path, ff, records in chain(_parsed_stream(pooled, workers), in_process):
        run.start(path)
        run.report(path, _import_papers(run, path, ff, records))


# Set inside the transaction of a paper file that changed papers, cleared once its citations are
# resolved: an import killed in between resolves them on the next run, even of unchanged files.
_RESOLVE_PENDING = "resolve_pending"


def _resolve_after_papers(store: Store, total: SourceStats) -> None:
    """Point citations at the papers just imported, match text references, give kept abstracts."""
    if not (total.imported or total.updated or store.get_meta(_RESOLVE_PENDING)):
        return
    store.resolve_citations()
    _resolve_text_references(store, total)
    from .sources.loading import apply_kept_abstracts

    apply_kept_abstracts(store)
    with store._transaction() as conn:
        conn.execute("DELETE FROM meta WHERE key=?", (_RESOLVE_PENDING,))


def _import_papers(
    run: _Run, path: Path, fmt: str, records: Iterator[PaperRecord | ImportProblem | CitationEdge]
) -> SourceStats:
    """One paper file in one transaction, with the citing sentences its records carry."""
    from .sources.detect import CONTEXT_FORMATS

    contexts: list[CitationEdge] = []
    stats = SourceStats()
    if run.filters(fmt):
        records = _filtered(records, run, fmt in CONTEXT_FORMATS, stats)
    with_contexts = fmt == "jsonl" or fmt in CONTEXT_FORMATS
    known = _known_source(run.store, path)

    def finish(conn: sqlite3.Connection, imported: ImportStats) -> None:
        if with_contexts:
            from .citations import write_record_contexts

            if write_record_contexts(conn, str(path), contexts):
                run.store._bump_generation(conn)
        if imported.imported or imported.updated:
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')", (_RESOLVE_PENDING,))
        if not known and not contexts:
            _forget_if_empty(conn, path)

    papers = count_skips(_with_contexts(_bounded(records, path), contexts), stats.skip_reasons)
    stats.add(run.store.import_source(str(path), papers, fmt=fmt, on_record=run.on_record, finish=finish))
    if with_contexts and fmt != "jsonl":
        stats.citations += len(contexts)
    return stats


# The longest field a record may bring, in characters: a title is a line, an abstract a page or
# two; a BibTeX entry or a full-text field can be longer. Past these a record is refused, not cut.
MAX_TITLE = 4_000
MAX_FIELD = 1 << 20
_TEXT_FIELDS = ("title", "abstract", "venue", "keywords", "key", "doi", "arxiv", "acl_id", "bibtex")


def _bounded(
    records: Iterator[PaperRecord | ImportProblem | CitationEdge], path: Path
) -> Iterator[PaperRecord | ImportProblem | CitationEdge]:
    """Records with NUL characters taken out of their text, and those with a field too long
    refused (one problem each, the file goes on).

    Why: one JSON Lines record with a 50 MB title was stored as is (the store grew 35-fold and
    the import took 700 MB), and NUL characters were stored inside titles, where they cut the
    text short in C tools and terminals."""
    for item in records:
        if not isinstance(item, PaperRecord):
            yield item
            continue
        too_long = _too_long(item)
        if too_long:
            yield ImportProblem(str(path), item.source_line, too_long)
            continue
        for name in _TEXT_FIELDS:
            value = getattr(item, name)
            if "\0" in value:
                setattr(item, name, value.replace("\0", ""))
        if any("\0" in a for a in item.authors):
            item.authors = [a.replace("\0", "") for a in item.authors]
        yield item


def _too_long(record: PaperRecord) -> str:
    """Why ``record`` is refused for its size ("" when it is not)."""
    if len(record.title) > MAX_TITLE:
        return f"record not stored: a title of {len(record.title):,} characters (at most {MAX_TITLE:,})"
    for name in _TEXT_FIELDS:
        if len(getattr(record, name)) > MAX_FIELD:
            return f"record not stored: its {name} has {len(getattr(record, name)):,} characters (at most {MAX_FIELD:,})"
    if sum(len(a) for a in record.authors) > MAX_FIELD:
        return f"record not stored: its authors run past {MAX_FIELD:,} characters"
    return ""


def _known_source(store: Store, path: Path) -> bool:
    """Whether ``path`` was imported before (its ``sources`` row predates this import)."""
    return store.conn.execute("SELECT 1 FROM sources WHERE path=?", (str(path),)).fetchone() is not None


def _forget_if_empty(conn: sqlite3.Connection, path: Path) -> None:
    """Remove the ``sources`` row of a new file that gave no paper (empty, binary, refused).

    Why: ``info`` counts the rows of ``sources``, so a refused file ("nothing imported", exit 1)
    was listed as an imported source with 0 papers. Runs inside the file's own transaction; a file
    imported before keeps its row (emptied on purpose, it still mirrors the file)."""
    conn.execute(
        "DELETE FROM sources WHERE path=? AND NOT EXISTS (SELECT 1 FROM paper_sources WHERE source=?)",
        (str(path), str(path)),
    )


def _filtered(
    records: Iterator[PaperRecord | ImportProblem | CitationEdge],
    run: _Run,
    with_edges: bool,
    stats: SourceStats,
) -> Iterator[PaperRecord | ImportProblem | CitationEdge]:
    """The records that pass the filter; the others are counted (``filtered``) and go no further.
    ``--around`` learns from every record. Citing sentences read beside papers (unarXive, Graph
    API pages) go with their papers: kept when a paper at one end was kept from this file."""
    filt, around = run.filt, run.filt.around
    kept_refs: set[str] = set()
    for item in records:
        if isinstance(item, PaperRecord):
            passed = filt.passes(item)
            if around is not None:
                around.learn(item)
            if passed and with_edges:
                kept_refs |= record_refs(item)
        else:
            passed = not isinstance(item, CitationEdge) or item.citing in kept_refs or item.cited in kept_refs
        if passed:
            yield item
            continue
        stats.filtered += 1
        if run.on_record is not None:
            run.on_record()


def _edge_filter(run: _Run, stats: SourceStats) -> Callable[[CitationEdge], bool] | None:
    """What keeps a citation row (indexer/filters.py ``passes_edge``), counting in ``stats`` the
    rows left out; ``--around`` learns from every row. ``None`` without filters."""
    if not run.filt.active:
        return None
    filt, conn = run.filt, run.store.conn
    last: list[Any] = [None, False]  # the rows of one S2AG line come one per citing sentence

    def keep(edge: CitationEdge) -> bool:
        pair = (edge.citing, edge.cited)
        if pair != last[0]:
            if filt.around is not None:
                filt.around.learn_edge(*pair)
            last[:] = [pair, filt.passes_edge(*pair, lambda ref: stored_ref(conn, ref))]
        if not last[1]:
            stats.filtered += 1
        return bool(last[1])

    return keep


def stored_ref(conn: sqlite3.Connection, ref: str) -> bool:
    """Whether a stored paper answers to ``ref`` (an open-source id, a DOI, an arXiv or Anthology
    id, a key), inside the caller's transaction."""
    from .sources.ids import SCHEMES

    if ref.partition(":")[0] in SCHEMES:
        return conn.execute("SELECT 1 FROM paper_ids WHERE ref=?", (ref,)).fetchone() is not None
    return any(
        conn.execute(f"SELECT 1 FROM papers WHERE {column}=? LIMIT 1", (ref,)).fetchone() is not None
        for column in ("doi", "arxiv", "acl_id", "key")
    )


def _import_zotero(
    store: Store, path: Path, collection: str | None, on_record: Callable[[], None] | None
) -> SourceStats:
    """A Zotero database: its own import, for the collection filter and the user's keys."""
    from .sources.zotero import ZoteroError, import_library

    stats = SourceStats()
    try:
        imported = import_library(
            store, path, collection=collection, on_record=on_record, skip_reasons=stats.skip_reasons
        )
    except ZoteroError as exc:
        raise ImportError_(f"{path}: {exc}") from None
    stats.add(imported)
    return stats


def _abstract_filter(run: _Run, stats: SourceStats) -> Callable[[Any], bool] | None:
    """With filters, an abstract row is kept only for a paper in the store: an abstract cannot be
    judged without its paper."""
    if not run.filt.active:
        return None
    conn = run.store.conn

    def keep(row: Any) -> bool:
        if stored_ref(conn, row.ref):
            return True
        stats.filtered += 1
        return False

    return keep


def _import_abstracts(run: _Run, path: Path, fmt: str) -> SourceStats:
    """One file of abstracts kept apart from their papers (S2AG ``abstracts``)."""
    from .sources import s2ag
    from .sources.loading import import_abstracts
    from .sources.pipeline import metered

    stats = SourceStats()
    rows = metered(path, _guarded(path, s2ag.iter_abstracts(path)), run.position(path))
    loaded = import_abstracts(
        run.store, str(path), fmt, rows, run.on_record, keep=_abstract_filter(run, stats)
    )
    stats.abstracts = loaded.stored
    _loaded_into(stats, loaded)
    return stats


def _import_edges(run: _Run, path: Path, fmt: str) -> SourceStats:
    """One file of citation edges with citing sentences (S2AG ``citations``, S2ORC
    ``pdf_parses``); bad rows are reported with their line and skipped, the rest imports."""
    from .sources.loading import import_edges
    from .sources.pipeline import metered

    stats = SourceStats()
    rows = metered(path, _guarded(path, EDGE_READERS[fmt](path)), run.position(path))
    loaded = import_edges(run.store, str(path), fmt, rows, run.on_record, keep=_edge_filter(run, stats))
    stats.citations = loaded.stored
    _loaded_into(stats, loaded)
    return stats


def _loaded_into(stats: SourceStats, loaded: LoadStats) -> None:
    """An edge or abstract file's skips (by reason) and problems into its import's ``stats``."""
    stats.skipped, stats.problems, stats.broken = loaded.skipped, loaded.problems, len(loaded.problems)
    stats.skip_reasons.update(loaded.skip_reasons)


def _resolve_text_references(store: Store, total: SourceStats) -> None:
    """Match text references (Crossref ``unstructured``) to stored papers by title."""
    from .sources.crossref import resolve_text_references

    with store._transaction() as conn:
        found = resolve_text_references(conn)
    total.text_references_matched += found.matched
    total.text_references_unmatched = found.unmatched


def _with_contexts(
    records: Iterator[PaperRecord | ImportProblem | CitationEdge], sink: list
) -> Iterator[PaperRecord | ImportProblem]:
    """The records unchanged, their references' citing sentences collected into ``sink`` as
    citation edges (JSON Lines ``references`` with ``contexts``: indexer/citations.py), and the
    edges a source gives beside its papers (Graph API pages) moved there."""
    for item in records:
        if isinstance(item, CitationEdge):  # an edge the source gives beside its papers (S2 API)
            sink.append(item)
            continue
        if isinstance(item, PaperRecord) and item.reference_contexts:
            citing = item.doi or item.arxiv or item.acl_id or item.key
            if citing:
                sink.extend(
                    CitationEdge(citing, ref, text, item.source_line) for ref, text in item.reference_contexts
                )
        yield item


def import_citations(
    store: Store,
    path: Path,
    on_record: Callable[[], None] | None = None,
    keep: Callable[[CitationEdge], bool] | None = None,
) -> SourceStats:
    """One citation file, all or nothing: a bad line is an :class:`ImportError_` naming it."""
    from .citations import CitationFileError, import_citation_file

    try:
        return SourceStats(citations=import_citation_file(store, path, on_record=on_record, keep=keep))
    except CitationFileError as exc:
        raise ImportError_(f"{exc}; nothing of this file was imported") from None
