"""Import sources (files or folders) into a store: format detection and dispatch.

One function that the CLI, the language server's workspace sync and the evaluation all use, so
every path into the store deduplicates and reports problems the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .records import ImportProblem, PaperRecord
from .store import ImportStats, Store

FORMATS = ("bibtex", "acl-xml", "jsonl", "citations")
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

    def add(self, other: ImportStats) -> None:
        super().add(other)
        self.citations += getattr(other, "citations", 0)

    def as_dict(self) -> dict[str, int]:
        return {**super().as_dict(), "citations": self.citations}


class ImportError_(Exception):
    """A source the user named cannot be imported (missing file, unknown format)."""


def detect_format(path: Path) -> str | None:
    """Format from the extension, with a peek at the content for ambiguous files."""
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
            ff = fmt or detect_format(f)
            if ff is None:
                if not path.is_dir():
                    raise ImportError_(f"{f}: unknown format (use --format {'|'.join(FORMATS)})")
                continue
            out.append((f.resolve(), ff))
    return out


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
    raise ImportError_(f"{path}: unknown format {fmt!r} (one of {', '.join(FORMATS)})")


def _guarded(
    path: Path, records: Iterator[PaperRecord | ImportProblem]
) -> Iterator[PaperRecord | ImportProblem]:
    """The last line of defence: an importer's unforeseen exception becomes one problem at the
    line it reached (the records before it still import), never a failed import of every file."""
    line = 0
    try:
        for item in records:
            line = item.line if isinstance(item, ImportProblem) else item.source_line
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
) -> ImportStats:
    """Import every source; each file is its own transaction. Returns the summed statistics.

    ``skip_current`` skips files unchanged (mtime and size) since their last import: what the
    language server uses to pick up ``.bib`` edits cheaply. ``workers`` parser processes (default:
    one when there are many files and more than one core; 0 parses in this process).
    """
    total = SourceStats()
    files = [
        (p, ff)
        for p, ff in expand_sources(paths, fmt)
        if not (skip_current and store.source_is_current(str(p)))
    ]
    # Citation files after the papers (their counts and the index touch the papers they cite).
    cite_files = [p for p, ff in files if ff == "citations"]
    files = [(p, ff) for p, ff in files if ff != "citations"]
    if workers is None:
        workers = 1 if len(files) >= 8 and (os.cpu_count() or 1) > 1 else 0
    for path, ff, records in _parsed_stream(files, workers):
        contexts: list = []
        stats = store.import_source(str(path), _with_contexts(records, contexts), fmt=ff, on_record=on_record)
        if ff == "jsonl":
            from .citations import replace_record_contexts

            replace_record_contexts(store, str(path), contexts)
        total.add(stats)
        if on_file is not None:
            on_file(path, stats)
    if total.imported or total.updated:
        store.resolve_citations()
    for path in cite_files:
        total.add(import_citations(store, path, on_record))
        if on_file is not None:
            on_file(path, SourceStats())
    return total


def _with_contexts(
    records: Iterator[PaperRecord | ImportProblem], sink: list
) -> Iterator[PaperRecord | ImportProblem]:
    """The records unchanged, their references' citing sentences collected into ``sink`` as
    citation edges (JSON Lines ``references`` with ``contexts``: indexer/citations.py)."""
    from .citations import CitationEdge

    for item in records:
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
