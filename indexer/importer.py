"""Import sources (files or folders) into a store: format detection and dispatch.

One function that the CLI, the language server's workspace sync and the evaluation all use, so
every path into the store deduplicates and reports problems the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

from .citations import CitationEdge
from .records import ImportProblem, PaperRecord
from .sources.detect import FORMATS as SOURCE_FORMATS
from .store import ImportStats, Store

FORMATS = ("bibtex", "acl-xml", "jsonl", "citations", *SOURCE_FORMATS, "zotero")
# Formats whose files are not paper records: edges (citations) and abstracts apart from papers.
EDGE_FORMATS = ("citations", "s2ag-citations")
ABSTRACT_FORMATS = ("s2ag-abstracts",)
# Formats read streaming in this process: their files are dumps (an OpenAlex part, an arXiv
# snapshot) that a parser process would hand back whole.
STREAMED_FORMATS = frozenset(SOURCE_FORMATS)
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

    def add(self, other: ImportStats) -> None:
        super().add(other)
        for name in ("citations", "abstracts", "text_references_matched"):
            setattr(self, name, getattr(self, name) + getattr(other, name, 0))
        self.text_references_unmatched = getattr(
            other, "text_references_unmatched", self.text_references_unmatched
        )

    def as_dict(self) -> dict[str, int]:
        return {
            **super().as_dict(),
            "citations": self.citations,
            "abstracts": self.abstracts,
            "text_references_matched": self.text_references_matched,
            "text_references_unmatched": self.text_references_unmatched,
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
    if name.endswith((".jsonl.gz", ".ndjson.gz", ".json.gz")):
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
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            ff = fmt or _detect(f, explicit=not path.is_dir())
            if ff is None:
                if not path.is_dir():
                    raise ImportError_(f"{f}: unknown format (use --format {'|'.join(FORMATS)})")
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


def _guarded(
    path: Path, records: Iterator[PaperRecord | ImportProblem]
) -> Iterator[PaperRecord | ImportProblem]:
    """The last line of defence: an importer's unforeseen exception becomes one problem at the
    line it reached (the records before it still import), never a failed import of every file."""
    line = 0
    try:
        for item in records:
            line = item.source_line if isinstance(item, PaperRecord) else getattr(item, "line", line)
            yield item
    except Exception as exc:
        yield ImportProblem(str(path), line, f"could not read past this point ({type(exc).__name__}: {exc})")


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
    works a few files ahead, and every file is still written in its own transaction.
    """
    if workers <= 0 or len(files) < 2:
        for path, ff in files:
            yield path, ff, iter_records(path, ff)
        return
    import multiprocessing as mp

    ctx = mp.get_context("spawn" if os.name == "nt" else "fork")
    with ctx.Pool(workers) as pool:
        for (path, ff), records in zip(files, pool.imap(_parse_file, files, chunksize=1), strict=True):
            yield path, ff, iter(records)


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
) -> ImportStats:
    """Import every source; each file is its own transaction. Returns the summed statistics.

    ``skip_current`` skips files unchanged (mtime and size) since their last import: what the
    language server uses to pick up ``.bib`` edits cheaply. ``workers`` parser processes (default:
    one when there are many files and more than one core; 0 parses in this process).
    ``zotero_collection`` filters Zotero databases (``""``: whole library; ``None``: as last time).
    """
    total = SourceStats()
    files = [
        (p, ff)
        for p, ff in expand_sources(paths, fmt)
        if not (skip_current and store.source_is_current(str(p)))
    ]
    for path in [p for p, ff in files if ff == "zotero"]:
        _report(total, _import_zotero(store, path, zotero_collection, on_record), path, on_file)
    files = [(p, ff) for p, ff in files if ff != "zotero"]
    # Edge files after the papers (their counts and the index touch the papers they cite); kept
    # abstracts after the papers too (they are given to the papers that lack one).
    edge_files = [(p, ff) for p, ff in files if ff in EDGE_FORMATS]
    abstract_files = [(p, ff) for p, ff in files if ff in ABSTRACT_FORMATS]
    paper_files = [(p, ff) for p, ff in files if ff not in EDGE_FORMATS and ff not in ABSTRACT_FORMATS]
    pooled = [(p, ff) for p, ff in paper_files if ff not in STREAMED_FORMATS]
    streamed = [(p, ff) for p, ff in paper_files if ff in STREAMED_FORMATS]
    if workers is None:
        workers = 1 if len(pooled) >= 8 and (os.cpu_count() or 1) > 1 else 0
    from .sources.pipeline import records_ahead  # a dump is parsed ahead in a second process

    in_process = ((p, ff, records_ahead(iter_records, p, ff)) for p, ff in streamed)
    for path, ff, records in chain(_parsed_stream(pooled, workers), in_process):
        _report(total, _import_papers(store, path, ff, records, on_record), path, on_file)
    if total.imported or total.updated:
        store.resolve_citations()
        _resolve_text_references(store, total)
        from .sources.loading import apply_kept_abstracts

        apply_kept_abstracts(store)
    for path, ff in abstract_files:
        _report(total, _import_abstracts(store, path, ff, on_record), path, on_file)
    for path, ff in edge_files:
        if ff == "citations":
            total.add(import_citations(store, path, on_record))
            if on_file is not None:
                on_file(path, SourceStats())
        else:
            _report(total, _import_edges(store, path, ff, on_record), path, on_file)
    return total


def _report(
    total: SourceStats, stats: ImportStats, path: Path, on_file: Callable[[Path, ImportStats], None] | None
) -> None:
    total.add(stats)
    if on_file is not None:
        on_file(path, stats)


def _import_papers(
    store: Store,
    path: Path,
    fmt: str,
    records: Iterator[PaperRecord | ImportProblem | CitationEdge],
    on_record: Callable[[], None] | None,
) -> SourceStats:
    """One paper file in one transaction, then the citing sentences its records carry."""
    contexts: list[CitationEdge] = []
    stats = SourceStats()
    stats.add(store.import_source(str(path), _with_contexts(records, contexts), fmt=fmt, on_record=on_record))
    from .sources.detect import CONTEXT_FORMATS

    if fmt == "jsonl" or fmt in CONTEXT_FORMATS:
        from .citations import replace_record_contexts

        replace_record_contexts(store, str(path), contexts)
        if fmt != "jsonl":
            stats.citations += len(contexts)
    return stats


def _import_zotero(
    store: Store, path: Path, collection: str | None, on_record: Callable[[], None] | None
) -> ImportStats:
    """A Zotero database: its own import, for the collection filter and the user's keys."""
    from .sources.zotero import ZoteroError, import_library

    try:
        return import_library(store, path, collection=collection, on_record=on_record)
    except ZoteroError as exc:
        raise ImportError_(f"{path}: {exc}") from None


def _import_abstracts(
    store: Store, path: Path, fmt: str, on_record: Callable[[], None] | None
) -> SourceStats:
    """One file of abstracts kept apart from their papers (S2AG ``abstracts``)."""
    from .sources import s2ag
    from .sources.loading import import_abstracts

    loaded = import_abstracts(store, str(path), fmt, _guarded(path, s2ag.iter_abstracts(path)), on_record)
    return SourceStats(
        abstracts=loaded.stored, skipped=loaded.skipped, broken=len(loaded.problems), problems=loaded.problems
    )


def _import_edges(store: Store, path: Path, fmt: str, on_record: Callable[[], None] | None) -> SourceStats:
    """One file of citation edges with citing sentences (S2AG ``citations``); bad rows are
    reported with their line and skipped, the rest imports."""
    from .sources import s2ag
    from .sources.loading import import_edges

    loaded = import_edges(store, str(path), fmt, _guarded(path, s2ag.iter_citations(path)), on_record)
    return SourceStats(
        citations=loaded.stored, skipped=loaded.skipped, broken=len(loaded.problems), problems=loaded.problems
    )


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


def import_citations(store: Store, path: Path, on_record: Callable[[], None] | None = None) -> SourceStats:
    """One citation file, all or nothing: a bad line is an :class:`ImportError_` naming it."""
    from .citations import CitationFileError, import_citation_file

    try:
        return SourceStats(citations=import_citation_file(store, path, on_record=on_record))
    except CitationFileError as exc:
        raise ImportError_(f"{exc}; nothing of this file was imported") from None
