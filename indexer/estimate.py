"""Before a long import: about how many records the files hold, how many pass the filters, and how
much the store grows (``citewise index --estimate``, and before any import of more than
``LONG_IMPORT_BYTES``).

Why sampled: a dump's record count is nowhere but in the dump, and reading a 40 GB gzip to count
it takes as long as importing it. The first ``SAMPLE_BYTES`` of a file *on disk* are read through
the importer's own reader; records per byte on disk (so a ``.gz`` or ``.zst`` needs no guess at
its compression ratio) times the file's size gives the count, and the filter's pass rate on the
same records gives how many would be kept. Of many files of one format and compression (30 S2AG
parts, hundreds of OpenAlex parts), ``SAMPLED_FILES`` are sampled and the others take their rate.

The store growth per kept record is measured, not modelled: ``bench/bench_store_growth.py``
imports 20,000 generated records of each source (its real sample records with new ids; 400 for
unarXive, whose papers are 200 KB each) into a store and divides the growth of the SQLite file
and of the BM25 index folder beside it by the records.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .citations import CitationEdge
from .filters import ImportFilter
from .records import ImportProblem, PaperRecord

SAMPLE_BYTES = 4 << 20  # bytes on disk read from a file to estimate it
SAMPLED_FILES = 3  # files sampled of each format and compression; the others take their rate
LONG_IMPORT_BYTES = 50 << 20  # files over this, together, get an estimate before their import
_UNPOSITIONED_ITEMS = 50_000  # a reader without a position (BibTeX, XML) is read this far
_POLL = 8  # items between two looks at the reader's position

# (store bytes, search index bytes) a kept record adds, by format: bench/bench_store_growth.py,
# 20,000 records a source (unarXive 400), measured on this machine (2 cores), SQLite 3 / Python
# 3.11. A citation row is one stored edge (one per citing sentence); an abstract row one kept
# abstract. Formats not measured take the arXiv figure (a record with an abstract, no references).
STORE_BYTES: dict[str, tuple[int, int]] = {
    "openalex": (7733, 1562),  # with ~19 references a work (the citations table)
    "s2ag-papers": (1094, 103),  # no abstract: S2AG ships them apart
    "s2ag-abstracts": (1419, 0),  # kept apart by corpus id (and copied to its paper when stored)
    "s2ag-citations": (334, 0),
    "arxiv": (1879, 465),
    "crossref": (9704, 612),  # with ~50 references a work, a fifth of them text references
    "unarxive": (11960, 604),  # with ~24 citing sentences a paper (citation_edges)
}
_DEFAULT_BYTES = STORE_BYTES["arxiv"]
# Formats whose items are citation rows or abstracts, judged by their papers at import.
_ROW_FORMATS = ("citations", "s2ag-citations", "s2orc-pdf-parses", "s2ag-abstracts")


@dataclass
class FileEstimate:
    """One file: its size on disk, and what a sample of it (or another file's rate) says."""

    path: Path
    fmt: str
    size: int
    compression: str = ""
    sampled_bytes: int = 0  # bytes on disk that the sample covered (0: not sampled)
    sampled: int = 0  # records (or citation rows) read in the sample
    passed: int | None = None  # of those, passing the filters (None: judged at import)
    complete: bool = False  # the sample read the whole file: the counts are exact
    rate: float | None = None  # records per byte on disk (None: unknown)

    @property
    def records(self) -> int | None:
        if self.complete:
            return self.sampled
        return None if self.rate is None else round(self.rate * self.size)

    @property
    def pass_rate(self) -> float | None:
        if self.passed is None or not self.sampled:
            return None
        return self.passed / self.sampled

    @property
    def kept(self) -> int | None:
        records, share = self.records, self.pass_rate
        return None if records is None or share is None else round(records * share)

    def growth(self) -> tuple[int, int] | None:
        """(store bytes, search index bytes) the kept records add."""
        if self.kept is None:
            return None
        store, index = STORE_BYTES.get(self.fmt, _DEFAULT_BYTES)
        return self.kept * store, self.kept * index

    def as_dict(self) -> dict[str, Any]:
        growth = self.growth()
        return {
            "path": str(self.path),
            "format": self.fmt,
            "bytes": self.size,
            "compression": self.compression or None,
            "sampled_bytes": self.sampled_bytes,
            "sampled_records": self.sampled,
            "exact": self.complete,
            "records": self.records,
            "pass_rate": None if self.pass_rate is None else round(self.pass_rate, 4),
            "kept": self.kept,
            "store_bytes": None if growth is None else growth[0],
            "index_bytes": None if growth is None else growth[1],
        }


def _items(path: Path, fmt: str) -> Iterator[Any]:
    """What the import reads from the file: records, or citation rows, or abstract rows."""
    from .importer import iter_records
    from .sources import s2ag
    from .sources.detect import EDGE_READERS

    if fmt in EDGE_READERS:  # S2AG citation rows, S2ORC parses: citing sentences, as the import reads them
        return EDGE_READERS[fmt](path)
    if fmt == "s2ag-abstracts":
        return s2ag.iter_abstracts(path)
    if fmt == "citations":
        from .citations import read_edges

        return read_edges(path)
    return iter_records(path, fmt)


def _judge(item: Any, fmt: str, filt: ImportFilter) -> bool | None:
    """Whether one sampled item counts (``None``: not a record) and passes (a bool)."""
    from .importer import LIBRARY_FORMATS

    if isinstance(item, ImportProblem):
        return None if item.skipped else False
    if isinstance(item, PaperRecord):
        return fmt in LIBRARY_FORMATS or filt.passes(item)
    if isinstance(item, CitationEdge) and fmt in _ROW_FORMATS:
        around = filt.around
        return around is None or around.admits_edge(item.citing, item.cited)
    if fmt == "s2ag-abstracts":
        return True
    return None  # a citing sentence beside papers (unarXive): goes with its paper


def sample_file(path: Path, fmt: str, filt: ImportFilter) -> FileEstimate:
    """Read the first ``SAMPLE_BYTES`` of ``path`` (on disk) the way the import would.

    The rate is measured between the first and the last time the reader's position moved: a
    ``.gz`` reader takes the file in chunks (128 KB), so at each move it is just past a chunk, and
    the count between two moves is the count of the bytes between them (a plain file's position
    is exact anyway)."""
    from .sources.stream import bytes_read, compression

    est = FileEstimate(path, fmt, path.stat().st_size, compression(path))
    passed = 0
    items = _items(path, fmt)
    moves: list[tuple[int, int]] = []  # (position, records read) where the position moved
    try:
        for n, item in enumerate(items, start=1):
            verdict = _judge(item, fmt, filt)
            if verdict is not None:
                est.sampled += 1
                passed += verdict
            if n % _POLL == 0:
                position = bytes_read(path)
                if position is not None and (not moves or position != moves[-1][0]):
                    moves.append((position, est.sampled))
                if (position or 0) >= SAMPLE_BYTES or (position is None and n >= _UNPOSITIONED_ITEMS):
                    break
        else:
            est.complete = True
    except Exception:  # noqa: BLE001 - a file the import will report: the estimate says what it read
        est.complete = False
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()
    est.sampled_bytes = est.size if est.complete else (moves[-1][0] if moves else 0)
    est.rate = _rate(moves, est.sampled)
    judged_at_import = fmt in _ROW_FORMATS and filt.by_content
    est.passed = None if judged_at_import else passed
    return est


def _rate(moves: list[tuple[int, int]], sampled: int) -> float | None:
    """Records per byte on disk from the reader's moves (``None`` when it never moved)."""
    if len(moves) >= 2 and moves[-1][0] > moves[0][0] and moves[-1][1] > moves[0][1]:
        return (moves[-1][1] - moves[0][1]) / (moves[-1][0] - moves[0][0])
    if moves and moves[-1][0]:
        return sampled / moves[-1][0]
    return None


def estimate(files: list[tuple[Path, str]], filt: ImportFilter) -> list[FileEstimate]:
    """Every file's estimate: ``SAMPLED_FILES`` of each format and compression sampled, the
    rest given their rate (records per byte on disk) and pass rate."""
    from .sources.stream import compression

    out: list[FileEstimate] = []
    sampled: dict[tuple[str, str], list[FileEstimate]] = {}
    for path, fmt in files:
        kind = (fmt, compression(path))
        group = sampled.setdefault(kind, [])
        if len(group) < SAMPLED_FILES:
            est = sample_file(path, fmt, filt)
            group.append(est)
        else:
            est = _like(path, fmt, kind[1], group)
        out.append(est)
    return out


def _like(path: Path, fmt: str, kind: str, group: list[FileEstimate]) -> FileEstimate:
    """A file not sampled, at the mean rate and pass rate of the sampled ones like it."""
    est = FileEstimate(path, fmt, path.stat().st_size, kind)
    covered = sum(g.sampled_bytes for g in group)
    read = sum(g.sampled for g in group)
    est.rate = read / covered if covered else None
    if read and all(g.passed is not None for g in group):
        est.sampled, est.passed = read, sum(g.passed or 0 for g in group)
    return est


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _count(n: int | None, exact: bool) -> str:
    if n is None:
        return "an unknown number of"
    return f"{n:,}" if exact else f"about {n:,}"


def describe(est: FileEstimate) -> str:
    """One line for one file."""
    rows = est.fmt in _ROW_FORMATS
    what = "abstracts" if est.fmt == "s2ag-abstracts" else "citation rows" if rows else "records"
    packed = f"{_size(est.size)} {est.compression}".strip()
    line = f"{est.path.name} ({est.fmt}, {packed}): {_count(est.records, est.complete)} {what}"
    if est.sampled_bytes and not est.complete:
        line += f" (from {est.sampled:,} in its first {_size(est.sampled_bytes)})"
    if est.pass_rate is not None and est.pass_rate < 1:
        line += f"; {est.pass_rate:.1%} pass the filters"
    elif est.passed is None and est.sampled:
        line += "; kept: those whose papers are in the store"
    if (growth := est.growth()) is not None:
        line += f" -> store +{_size(growth[0])}, search index +{_size(growth[1])}"
    return line


def total_line(estimates: list[FileEstimate]) -> str:
    """The sum over every file, with what is unknown said so."""
    size = sum(e.size for e in estimates)
    records = [e.records for e in estimates]
    kept = [e.kept for e in estimates]
    growth = [e.growth() for e in estimates]
    known_growth = [g for g in growth if g is not None]
    line = f"{len(estimates)} files, {_size(size)}: about {sum(r or 0 for r in records):,} records"
    line += f", about {sum(k or 0 for k in kept):,} kept"
    if known_growth:
        line += (
            f"; store +{_size(sum(g[0] for g in known_growth))}, "
            f"search index +{_size(sum(g[1] for g in known_growth))}"
        )
    if None in records or None in kept:
        line += " (not counting the files whose share is decided at import)"
    return line
