"""``citewise index``: import sources into the store, drop sources, then bring the search and
embedding indexes up to date, with progress bars and one summary (text or JSON).

Why apart from :mod:`citewise.cli`: importing is the command with the most failure modes (unreadable
files, broken entries, a store another process writes, a damaged index) and its own helpers; the
other commands only read the store.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .cli_common import UserError, non_negative_int, open_store
from .cli_engine import add_engine_argument, engine_summary
from .cli_index_summary import (
    announce_search_index,
    holdings_line,
    import_counts,
    search_index_line,
    search_index_state,
    skip_line,
)

if TYPE_CHECKING:  # imported where used: `citewise --help` must not load the indexer
    from citewise.indexer.estimate import FileEstimate
    from citewise.indexer.filters import ImportFilter

LONG_IMPORT_BYTES = 50 << 20  # files over this, together, get an estimate before their import


def register(sub: argparse._SubParsersAction, store_help: str) -> None:
    """The ``index`` subcommand's arguments."""
    p = sub.add_parser(
        "index",
        help="import BibTeX / ACL Anthology XML / JSON Lines papers, OpenAlex / Semantic Scholar / arXiv / "
        "Crossref dumps and API JSON, and citation edges (TSV or JSON Lines)",
    )
    p.add_argument("sources", nargs="*", metavar="SOURCE", help="files or folders (searched recursively)")
    p.add_argument("--store", help=store_help)
    from citewise.indexer.importer import FORMATS

    p.add_argument("--format", choices=FORMATS, help="force the format (default: told by name and content)")
    p.add_argument("--drop", action="append", metavar="SOURCE", help="forget a source file (repeatable)")
    p.add_argument(
        "--zotero-collection",
        default="",
        metavar="NAME",
        help="of a Zotero database (zotero.sqlite), only this collection and its subcollections",
    )
    _register_filters(p)
    p.add_argument("--no-search-index", action="store_true", help="skip (re)building the BM25 index")
    p.add_argument(
        "--embed",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="embed papers with the dense model for --prefetch dense/hybrid (default: only when the "
        "ranking uses them: the model is fused by default, or the store already has embeddings)",
    )
    p.add_argument(
        "--max-problems", type=non_negative_int, default=20, help="broken entries to list (default 20)"
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    add_engine_argument(p)
    p.set_defaults(func=cmd_index)


def _register_filters(p: argparse.ArgumentParser) -> None:
    """``--years --field --venue --around`` and ``--estimate`` (docs/sources.md, "Filters")."""
    group = p.add_argument_group(
        "filters",
        "applied while reading corpora and dumps (not your .bib or Zotero library); the records left "
        "out are counted, never stored. Every filter given must pass; a repeated one passes on any value.",
    )
    group.add_argument("--years", metavar="RANGE", help="publication years: 2015-2024, 2015-, -2010 or 2019")
    group.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="NAME",
        help="field, case-insensitive: an arXiv category (cs.CL; cs or cs.* for all of cs), an OpenAlex topic, "
        "subfield, field, domain or concept, an S2 field of study (repeatable)",
    )
    group.add_argument(
        "--venue", action="append", default=[], metavar="TEXT", help="part of the venue's name (repeatable)"
    )
    group.add_argument(
        "--around",
        metavar="LIBRARY",
        help="one hop around your library (a .bib, a zotero.sqlite or a citewise store): its papers, the "
        "papers they cite and the papers citing them",
    )
    p.add_argument(
        "--estimate",
        action="store_true",
        help="print how many records the files hold, how many pass the filters and how much the store "
        "grows, and import nothing (printed anyway before an import of more than 50 MB)",
    )


# -- the command ------------------------------------------------------------------------------------
def cmd_index(args: argparse.Namespace) -> int:
    """``citewise index``: import, drop sources, then bring the search and embedding indexes up to
    date, in that order, so one command leaves a store ready to serve."""
    files = _importable_files(args)
    filt = _import_filter(args, files)
    if args.estimate:
        _print_estimate(files, filt, args, only=True)
        return 0
    store, estimates = _open_for_import(args, files, filt)
    generation = store.generation  # unchanged after the import and drops: nothing new came
    stats, elapsed, incomplete = _import_with_progress(store, files, args, filt)
    seen = sum(
        stats.as_dict()[k]
        for k in ("imported", "updated", "unchanged", "duplicates", "citations", "abstracts")
    )
    if files and seen + stats.skipped + stats.filtered == 0:
        raise _nothing_imported(store, files, stats)
    summary = {
        **stats.as_dict(),
        "files": len(files),
        "seconds": round(elapsed, 1),
        "papers_per_second": round(seen / elapsed, 1) if elapsed else 0.0,
    }
    if files:  # what the files hold, in `citewise info`'s words and numbers
        summary["counts"] = import_counts(store, (p for p, _ in files))
    if estimates is not None:
        summary["estimate"] = [e.as_dict() for e in estimates]
    _filter_notes(store, filt, stats, args.quiet)
    summary["incomplete"] = incomplete
    if args.drop:
        summary["removed"] += _drop_sources(store, args.drop)
    summary.update(_search_index_step(store, args, len(files), store.generation != generation))
    return_freed_memory()
    if _should_embed(store, args.embed):
        summary.update(_embed_store(store, args.quiet))
        return_freed_memory()
    if args.embed is not False:  # --no-embed: no model runs at all
        summary.update(_embed_citing(store, args.quiet))
    if args.engine != "local":  # copy to the search engine last: it takes the vectors just made
        from .cli_engine import sync_to_engine

        summary["engine"] = sync_to_engine(store, args.engine, args.quiet)
    if args.json:
        print(json.dumps(summary))
    else:
        _print_summary(summary, store, filt.active)
    if summary.get("embedding_error"):
        print(f"citewise: error: {summary['embedding_error']}", file=sys.stderr)
        return 1
    return _report_incomplete(incomplete)


# Exit status of an import that kept what it could but could not read a file to its end (a
# truncated download, trailing garbage): a script must not take a half-read dump as success.
EXIT_INCOMPLETE = 1


def _incomplete_file(path: Path, stats) -> dict | None:
    """Where reading ``path`` stopped before its end, and how many records were kept, or None."""
    cut = next((p for p in stats.problems if getattr(p, "incomplete", False)), None)
    if cut is None:
        return None
    kept = stats.imported + stats.updated + stats.unchanged + stats.duplicates
    return {"path": str(path), "line": cut.line, "reason": cut.message, "kept": kept}


def _report_incomplete(incomplete: list[dict]) -> int:
    """One line per file that could not be read to its end; the exit status of the command."""
    for cut in incomplete:
        print(
            f"citewise: error: {cut['path']}: not read to its end (at line {cut['line']}: "
            f"{cut['reason']}); the {cut['kept']:,} records before that point are kept in the store. "
            "Repair or download the file again and run the same command: nothing is imported twice",
            file=sys.stderr,
        )
    return EXIT_INCOMPLETE if incomplete else 0


def _open_for_import(args: argparse.Namespace, files: list, filt: ImportFilter) -> tuple:
    """The store to import into (created only when there are files), what it knows about an
    ``--around`` library, and the estimate printed before a long import (``None`` otherwise)."""
    # Without sources, `index` only rebuilds indexes (or drops sources): no reason to create a store.
    store = open_store(args, create=bool(args.sources), write=True)
    if store.created:
        print(f"citewise: created a new store at {store.path}", file=sys.stderr)
    if filt.around is not None:
        from citewise.indexer.filter_seeds import learn_from_store

        learn_from_store(store, filt.around)
    estimates = None
    if sum(p.stat().st_size for p, _ in files) > LONG_IMPORT_BYTES:
        estimates = _print_estimate(files, filt, args, only=False)
    return store, estimates


def _print_summary(summary: dict, store, filtered: bool) -> None:
    """The text summary: the outcome of the records, every skip by its reason, what the files hold
    in ``citewise info``'s words (:mod:`citewise.cli_index_summary`), then the indexes."""
    files = summary["files"]
    took = (
        f"{files:,} {'file' if files == 1 else 'files'} in {summary['seconds']:.1f} s "
        f"({summary['papers_per_second']:,.0f} records/s)"
        if files
        else "no files named"
    )
    print(
        f"{summary['imported']:,} imported, {summary['updated']:,} updated, {summary['unchanged']:,} unchanged, "
        f"{summary['duplicates']:,} duplicates merged, {summary['skipped']:,} skipped, "
        f"{summary['broken']:,} broken, {summary['removed']:,} removed"
        + (f", {summary['filtered']:,} filtered out" if filtered else "")
        + f"; {took} -> {store.path}"
    )
    if summary["skipped"]:
        print(skip_line(summary["skipped"], summary.get("skipped_by_reason", {})))
    if "counts" in summary:
        print(holdings_line(summary["counts"]))
    if "search_index" in summary:
        print(search_index_line(summary["search_index"]))
    citing = summary.get("citing_embedding") or {}
    if "papers" in citing:
        print(
            f"cited-as list: {citing['papers']} cited papers by their {citing['texts']} citing texts "
            f"({citing['embedded']} embedded now, {summary['citing_embed_seconds']:.1f} s)"
        )
    if "engine" in summary:
        print(engine_summary(summary["engine"]))


def _importable_files(args: argparse.Namespace) -> list:
    """The (path, format) pairs behind ``index SOURCES``, checked before any store is opened or
    created, so a typo or a folder without importable files fails without leaving a store behind."""
    from citewise.indexer.importer import KINDS_LOOKED_FOR, ImportError_, expand_sources

    try:
        files = expand_sources(args.sources, args.format)
    except ImportError_ as exc:
        raise UserError(str(exc)) from exc
    if args.zotero_collection and not any(ff == "zotero" for _, ff in files):
        raise UserError("--zotero-collection filters a Zotero database (zotero.sqlite); none was given")
    if not files and args.sources:
        raise UserError(
            f"{', '.join(args.sources)}: no importable files (looked for {KINDS_LOOKED_FOR}); "
            "pass files of those kinds, or --format to force one"
        )
    return files


class _ImportProgress:
    """The import's progress (:class:`citewise.progress.Phase`): bytes on disk of the files
    (compressed bytes of a ``.gz``), so the rate and ETA hold for a dump whose record count nobody
    knows; the records read and their rate beside it. A streamed file moves the count as it is
    read, any other file when it is done; the records count moves meanwhile (every
    ``RECORDS_EVERY`` records), so one big ``.bib`` does not look frozen."""

    RECORDS_EVERY = 200

    def __init__(self, files: list, quiet: bool) -> None:
        from .progress import Phase

        self.sizes = {p: p.stat().st_size for p, _ in files}
        total = sum(self.sizes.values())
        self.bar = Phase("importing", "B", total or None, quiet=quiet, binary=True)
        self.done = 0  # bytes of the files imported
        self.current: Path | None = None
        self.finished: list[Path] = []
        self.records = 0

    def start(self, path: Path) -> None:
        self.current = path

    def position(self, path: Path, position: int) -> None:
        self._move_to(self.done + min(position, self.sizes.get(path, position)))

    def file_done(self, path: Path) -> None:
        self.done += self.sizes.get(path, 0)
        self.finished.append(path)
        self.current = None
        self._move_to(self.done)

    def record(self) -> None:
        self.records += 1
        if self.records % self.RECORDS_EVERY == 0 and not self.bar.disabled:
            elapsed = max(self.bar.elapsed(), 1e-9)
            self.bar.set_detail(f"{self.records:,} records, {self.records / elapsed:,.0f}/s")

    def _move_to(self, n: int) -> None:
        if n > self.bar.n:
            self.bar.set(n)

    def interrupted(self) -> UserError:
        """Ctrl-C: what was kept, file by file (each file is one transaction)."""
        self.bar.close()
        kept = (
            f"the {len(self.finished)} file(s) imported before it are kept"
            if self.finished
            else "nothing else was imported"
        )
        if self.current is None:
            return UserError(f"interrupted: the store is as it was after the last whole file; {kept}")
        return UserError(
            f"interrupted while importing {self.current}: nothing of that file was kept (the store is as it "
            f"was before it; run the same command again to import it); {kept}"
        )


def _import_with_progress(store, files: list, args: argparse.Namespace, filt: ImportFilter) -> tuple:
    """Import ``files`` under a progress bar and return ``(stats, seconds, incomplete)``.

    Broken entries are warned about as they are met (through the bar, so it is not torn), but only
    the first ``--max-problems`` of them: a file with 10,000 broken records must not flood the
    terminal; the rest are counted in one closing line. Ctrl-C becomes a user error saying what
    was kept, since the importer rolls back only the file being imported."""
    from citewise.indexer.importer import ImportError_, import_sources

    t0 = time.perf_counter()
    progress = _ImportProgress(files, args.quiet)
    bar = progress.bar
    problems_shown = 0
    incomplete: list[dict] = []  # files not read to their end: said once, at the end

    def on_file(path: Path, stats) -> None:
        nonlocal problems_shown
        progress.file_done(path)
        if (cut := _incomplete_file(path, stats)) is not None:
            incomplete.append(cut)
        for problem in stats.problems:
            if getattr(problem, "incomplete", False):
                continue
            if problems_shown < args.max_problems:
                bar.write(f"citewise: warning: {problem}")
            problems_shown += 1

    try:
        stats = import_sources(
            store,
            [str(p) for p, _ in files],
            fmt=args.format,
            on_record=progress.record,
            on_file=on_file,
            zotero_collection=args.zotero_collection,
            filt=filt,
            on_start=progress.start,
            on_bytes=progress.position,
        )
    except KeyboardInterrupt:
        raise progress.interrupted() from None
    except ImportError_ as exc:  # a citation file with a bad line: rolled back, nothing of it kept
        bar.close()
        raise UserError(str(exc)) from None
    bar.close()
    elapsed = time.perf_counter() - t0
    if problems_shown > args.max_problems:
        print(f"... and {problems_shown - args.max_problems} more broken entries", file=sys.stderr)
    return stats, elapsed, incomplete


def _import_filter(args: argparse.Namespace, files: list) -> ImportFilter:
    """The ``ImportFilter`` of ``--years --field --venue --around`` (the library read here, so a
    bad one fails before any store is opened)."""
    from citewise.indexer.filters import ImportFilter

    given = args.years or args.field or args.venue or args.around
    if given and not files:
        raise UserError(
            "--years, --field, --venue and --around filter the files of an import: name the files"
        )
    around = None
    if args.around:
        from citewise.indexer.filter_seeds import LibraryError, load_library

        try:
            around = load_library(args.around)
        except LibraryError as exc:
            raise UserError(str(exc)) from None
    try:
        return ImportFilter.build(args.years, args.field, args.venue, around)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _print_estimate(
    files: list, filt: ImportFilter, args: argparse.Namespace, only: bool
) -> list[FileEstimate]:
    """The estimate of ``files`` (indexer/estimate.py) on stderr, or as JSON on stdout for
    ``--estimate --json``; before an import it is quiet with ``-q``."""
    from citewise.indexer.estimate import describe, estimate, total_line

    if not files:
        raise UserError("--estimate: name the files to estimate")
    estimates = estimate(files, filt)
    if only and args.json:
        print(json.dumps({"filters": filt.describe(), "files": [e.as_dict() for e in estimates]}))
    elif only or not args.quiet:
        with_filters = f" with {filt.describe()}" if filt.active else ""
        print(f"citewise: estimate{with_filters}:", file=sys.stderr)
        for est in estimates[:10]:
            print(f"  {describe(est)}", file=sys.stderr)
        if len(estimates) > 10:
            print(f"  ... and {len(estimates) - 10} more files", file=sys.stderr)
        if len(estimates) > 1:
            print(f"  total: {total_line(estimates)}", file=sys.stderr)
        if only:
            print("citewise: nothing imported (--estimate)", file=sys.stderr)
    return estimates


def _filter_notes(store, filt: ImportFilter, stats, quiet: bool) -> None:
    """After a filtered import: a filter that kept nothing, and ``--around`` neighbours learned
    too late to be kept by this run (the next run of the same command adds them)."""
    if not filt.active or quiet:
        return
    if stats.filtered and not (stats.imported + stats.updated + stats.unchanged + stats.duplicates):
        print(
            f"citewise: note: no record passed {filt.describe()} ({stats.filtered} left out)", file=sys.stderr
        )
    if filt.around is None or not filt.around.late:
        return
    from citewise.indexer.importer import stored_ref

    missing = sum(not stored_ref(store.conn, ref) for ref in filt.around.late)
    if missing:
        print(
            f"citewise: note: {missing:,} paper(s) one hop from the library were learned of during this import "
            "(from the references of library papers and from citation rows) after the files that may hold them "
            "were read; run the same command again to add those the files hold",
            file=sys.stderr,
        )


def _drop_sources(store, sources: Sequence[str]) -> int:
    """Drop ``--drop`` sources from the store and return how many papers went with them.

    Sources are recorded by absolute path, so each argument is resolved first; one that is not a
    source is a warning, not an error, so the rest of the run (import, indexes) still happens."""
    from citewise.indexer.citations import drop_citation_source

    known = {s["path"] for s in store.sources()}
    removed = 0
    for source in sources:
        resolved = str(Path(source).expanduser().resolve())
        if resolved not in known:
            print(
                f"citewise: warning: --drop {source}: not a source of {store.path} (sources are "
                "recorded by absolute path); nothing dropped",
                file=sys.stderr,
            )
            continue
        removed += store.drop_source(resolved)
        drop_citation_source(store, resolved)
    return removed


def _search_index_step(store, args: argparse.Namespace, files: int, changed: bool) -> dict:
    """The search index step, said: its state before (``summary["search_index"]``) and, when this
    run brought nothing new, a line before the work saying what it does and why (a stale index
    of a big store takes a minute to rebuild, which after "0 imported" looked like a hang)."""
    state = search_index_state(store)
    if not changed and not args.quiet:
        announce_search_index(state, files, rebuild=not args.no_search_index)
    done = {**state.as_dict(), "rebuilt": False, "papers": store.count(), "seconds": 0.0}
    if args.no_search_index:
        return {"search_index": done}
    seconds = _rebuild_search_index(store, args.quiet)
    done.update(rebuilt=not state.current, seconds=seconds)
    return {"search_index": done, "search_index_seconds": seconds}


def _rebuild_search_index(store, quiet: bool) -> float:
    """Rebuild the BM25 index in full (no delta: ``index`` is the moment to pay for a clean one)
    and return the seconds it took, for the summary."""
    from citewise.indexer import bm25_files

    from .progress import Phase

    t1 = time.perf_counter()
    with Phase("search index", " papers", store.count(), quiet=quiet) as bar:

        def merged(done: int, total: int) -> None:
            bar.set_detail(f"postings written {100 * done // max(total, 1)}%")

        bm25_files.load_or_build(store, on_doc=bar.update, allow_delta=False, on_merge=merged)
    return round(time.perf_counter() - t1, 1)


def return_freed_memory() -> None:
    """Give the system back the heap that a finished phase freed, before the next one grows.

    Why: glibc keeps freed memory for the process to reuse, and the phases do not reuse it in
    the same shapes. After the BM25 build of ACM-CR (its postings sorted within a 512 MB budget)
    the process held 250 MB, 160 MB of it freed; ``malloc_trim`` returned those 160 MB, so the
    embedding and the graph that come next start from 90 MB of heap, not 250. Elsewhere (macOS,
    Windows, musl) there is nothing to call, and nothing is done."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _nothing_imported(store, files: list, stats) -> UserError:
    """Every file was unreadable, had no entries, or only broken ones: the command failed.

    A store this run created is removed again, so a typo does not leave an empty store behind."""
    where = ", ".join(str(p) for p, _ in files[:3]) + (" ..." if len(files) > 3 else "")
    note = ""
    if store.created:
        store.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(store.path) + suffix).unlink(missing_ok=True)
        note = "; no store was created"
    if len(stats.problems) == 1:
        return UserError(f"nothing imported: {stats.problems[0]}{note}")
    if stats.problems:
        first = ", ".join(f"{p.source}:{p.line}" for p in stats.problems[:5])
        more = ", ..." if len(stats.problems) > 5 else ""
        return UserError(
            f"nothing imported: all {stats.broken} records are broken (at {first}{more}); "
            f"fix them and run again{note}"
        )
    if all(_empty(p) for p, _ in files):
        return UserError(
            f"nothing imported: {where}: {'an empty file' if len(files) == 1 else 'empty files'}{note}"
        )
    kinds = sorted({fmt for _, fmt in files})
    return UserError(f"nothing imported: no entries found in {where} (read as {', '.join(kinds)}){note}")


def _empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


def _should_embed(store, embed: bool | None) -> bool:
    """``--embed`` / ``--no-embed`` decide; without either, papers are embedded only when the
    ranking would use the embeddings (``dense_index.ranking_uses_embeddings``): the shipped dense
    model is not embedded by default, since embedding a big store takes minutes on a laptop."""
    if embed is not None:
        return embed
    from citewise.models import dense_index

    return dense_index.ranking_uses_embeddings(store)


def _embed_store(store, quiet: bool) -> dict:
    """Embed new papers and update the ANN index when a dense model is installed (resumable).
    The graph's build, once the papers are embedded, is a phase of its own: minutes of one
    library call on a big store, shown by a heartbeat (elapsed time) since nothing counts it."""
    from citewise.models import dense_index

    from .progress import Heartbeat, Phase

    def build(phase: Phase) -> dict | None:
        graph = Heartbeat(Phase("nearest-neighbour index", "", quiet=quiet, lazy=True))

        def embedded() -> None:
            phase.close()
            return_freed_memory()
            graph.start()

        try:
            return dense_index.build_index(store, progress=phase.set, on_embedded=embedded)
        finally:
            graph.stop()

    return _embedding_step(
        build,
        ("embedding papers", " papers", "embeddings done so far are kept", "embeddings skipped"),
        ("embed_seconds", "embedding"),
        quiet,
    )


def _embed_citing(store, quiet: bool) -> dict:
    """Where the store knows how its papers are cited, embed the citing texts not embedded yet
    (``models/citing_vectors.py``; resumable: what was embedded is kept when interrupted)."""
    from citewise.models import citing_vectors

    out = _embedding_step(
        lambda phase: citing_vectors.build_for(store, phase.set),
        (
            "embedding citing texts",
            " texts",
            "citing texts embedded so far are kept",
            "citing texts not embedded",
        ),
        ("citing_embed_seconds", "citing_embedding"),
        quiet,
    )
    skipped = out.get("citing_embedding", {}).get("skipped")
    if skipped and not quiet:
        print(f"citewise: note: citing texts not embedded ({skipped}); BM25 reads them", file=sys.stderr)
    return out


def _embedding_step(build, words: tuple[str, str, str, str], keys: tuple[str, str], quiet: bool) -> dict:
    """One embedding step of ``citewise index`` (``build(phase)``, its progress): Ctrl-C
    keeps what was embedded and says how to resume; a damaged model is reported in the summary
    without losing the import. ``words``: the bar's label and unit, what is kept when interrupted,
    what is skipped on a model error; ``keys``: the summary's seconds and result keys."""
    from citewise.models import dense_index

    from .progress import Phase

    label, unit, kept, skipped = words
    t0 = time.perf_counter()
    bar = Phase(label, unit, quiet=quiet, lazy=True)
    try:
        info = build(bar)
    except KeyboardInterrupt:
        raise UserError(f"interrupted: {kept}; run `citewise index` again to resume") from None
    except dense_index.ModelError as exc:
        return {"embedding_error": f"{exc}; papers were imported, {skipped}"}
    finally:
        bar.close()
    if info is None:
        return {}
    return {keys[0]: round(time.perf_counter() - t0, 1), keys[1]: info}
