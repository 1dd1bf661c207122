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

from .cli_common import UserError, non_negative_int, open_store, progress_bar
from .cli_engine import add_engine_argument, engine_summary


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


# -- the command ------------------------------------------------------------------------------------
def cmd_index(args: argparse.Namespace) -> int:
    """``citewise index``: import, drop sources, then bring the search and embedding indexes up to
    date, in that order, so one command leaves a store ready to serve."""
    files = _importable_files(args)
    # Without sources, `index` only rebuilds indexes (or drops sources): no reason to create a store.
    store = open_store(args, create=bool(args.sources), write=True)
    if store.created:
        print(f"citewise: created a new store at {store.path}", file=sys.stderr)
    stats, elapsed = _import_with_progress(store, files, args)
    seen = sum(
        stats.as_dict()[k]
        for k in ("imported", "updated", "unchanged", "duplicates", "citations", "abstracts")
    )
    if files and seen + stats.skipped == 0:
        raise _nothing_imported(store, files, stats)
    summary = {
        **stats.as_dict(),
        "files": len(files),
        "seconds": round(elapsed, 1),
        "papers_per_second": round(seen / elapsed, 1) if elapsed else 0.0,
    }
    if args.drop:
        summary["removed"] += _drop_sources(store, args.drop)
    if not args.no_search_index:
        summary["search_index_seconds"] = _rebuild_search_index(store, args.quiet)
    if _should_embed(store, args.embed):
        summary.update(_embed_store(store, args.quiet))
    if args.engine != "local":  # copy to the search engine last: it takes the vectors just made
        from .cli_engine import sync_to_engine

        summary["engine"] = sync_to_engine(store, args.engine, args.quiet)
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{summary['imported']} imported, {summary['updated']} updated, {summary['unchanged']} unchanged, "
            f"{summary['duplicates']} duplicates merged, {summary['skipped']} skipped, {summary['broken']} broken, "
            f"{summary['removed']} removed, {summary['citations']} citation edges; {len(files)} files in {elapsed:.1f} s "
            f"({summary['papers_per_second']:.0f} papers/s) -> {store.path}"
        )
        if "engine" in summary:
            print(engine_summary(summary["engine"]))
    if summary.get("embedding_error"):
        print(f"citewise: error: {summary['embedding_error']}", file=sys.stderr)
        return 1
    return 0


def _importable_files(args: argparse.Namespace) -> list:
    """The (path, format) pairs behind ``index SOURCES``, checked before any store is opened or
    created, so a typo or a folder without importable files fails without leaving a store behind."""
    from citewise.indexer.importer import ImportError_, expand_sources

    try:
        files = expand_sources(args.sources, args.format)
    except ImportError_ as exc:
        raise UserError(str(exc)) from exc
    if args.zotero_collection and not any(ff == "zotero" for _, ff in files):
        raise UserError("--zotero-collection filters a Zotero database (zotero.sqlite); none was given")
    if not files and args.sources:
        raise UserError(
            f"{', '.join(args.sources)}: no importable files (looked for .bib, ACL Anthology .xml, .jsonl); "
            "pass files of those kinds, or --format to force one"
        )
    return files


def _import_with_progress(store, files: list, args: argparse.Namespace) -> tuple:
    """Import ``files`` under a progress bar and return ``(stats, seconds)``.

    Broken entries are warned about as they are met (through the bar, so it is not torn), but only
    the first ``--max-problems`` of them: a file with 10,000 broken records must not flood the
    terminal; the rest are counted in one closing line. Ctrl-C becomes a user error saying what
    was kept, since the importer rolls back only the file being imported."""
    from citewise.indexer.importer import ImportError_, import_sources

    t0 = time.perf_counter()
    bar = progress_bar(None, "importing", " papers", args.quiet)
    problems_shown = 0

    def on_file(path: Path, stats) -> None:
        nonlocal problems_shown
        for problem in stats.problems:
            if problems_shown < args.max_problems:
                bar.write(f"citewise: warning: {problem}", file=sys.stderr)
            problems_shown += 1

    try:
        stats = import_sources(
            store,
            [str(p) for p, _ in files],
            fmt=args.format,
            on_record=lambda: bar.update(1),
            on_file=on_file,
            zotero_collection=args.zotero_collection,
        )
    except KeyboardInterrupt:
        bar.close()
        raise UserError(
            "interrupted: the file being imported was rolled back; earlier files are kept"
        ) from None
    except ImportError_ as exc:  # a citation file with a bad line: rolled back, nothing of it kept
        bar.close()
        raise UserError(str(exc)) from None
    bar.close()
    elapsed = time.perf_counter() - t0
    if problems_shown > args.max_problems:
        print(f"... and {problems_shown - args.max_problems} more broken entries", file=sys.stderr)
    return stats, elapsed


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


def _rebuild_search_index(store, quiet: bool) -> float:
    """Rebuild the BM25 index in full (no delta: ``index`` is the moment to pay for a clean one)
    and return the seconds it took, for the summary."""
    from citewise.indexer import bm25_files

    t1 = time.perf_counter()
    bar = progress_bar(store.count(), "search index", " papers", quiet)
    bm25_files.load_or_build(store, on_doc=lambda: bar.update(1), allow_delta=False)
    bar.close()
    return round(time.perf_counter() - t1, 1)


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
    return UserError(
        f"nothing imported: no entries found in {where} (is it BibTeX, ACL Anthology XML or JSON Lines?){note}"
    )


def _should_embed(store, embed: bool | None) -> bool:
    """``--embed`` / ``--no-embed`` decide; without either, papers are embedded only when the
    ranking would use the embeddings (``dense_index.ranking_uses_embeddings``): the shipped dense
    model is not embedded by default, since embedding a big store takes minutes on a laptop."""
    if embed is not None:
        return embed
    from citewise.models import dense_index

    return dense_index.ranking_uses_embeddings(store)


def _embed_store(store, quiet: bool) -> dict:
    """Embed new papers and update the ANN index when a dense model is installed (resumable)."""
    from citewise.models import dense_index

    t0 = time.perf_counter()
    bar = progress_bar(None, "embedding", " papers", quiet)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    try:
        info = dense_index.build_index(store, progress=progress)
    except KeyboardInterrupt:
        raise UserError(
            "interrupted: embeddings done so far are kept; run `citewise index` again to resume"
        ) from None
    except dense_index.ModelError as exc:
        return {"embedding_error": f"{exc}; papers were imported, embeddings skipped"}
    finally:
        bar.close()
    if info is None:
        return {}
    return {"embed_seconds": round(time.perf_counter() - t0, 1), "embedding": info}
