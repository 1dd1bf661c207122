"""The ``citewise`` command: index, search, suggest, eval, train, export, serve, info.

A user's mistake (a missing file, a bad flag, a broken store) prints one clear line to stderr
and exits non-zero; tracebacks are for our bugs only (``CITEWISE_DEBUG=1`` shows them always).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from . import __version__
from .settings import default_store_path


class UserError(Exception):
    """A problem the user can fix; printed without a traceback."""


def _store_path(args: argparse.Namespace) -> Path:
    return Path(args.store).expanduser() if getattr(args, "store", None) else default_store_path()


def _open_store(args: argparse.Namespace, create: bool = False):
    from citewise.indexer.store import Store

    return Store(_store_path(args), create=create)


def _progress(total: int | None, desc: str, unit: str, quiet: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=quiet or None, file=sys.stderr,
                dynamic_ncols=True, mininterval=0.5, smoothing=0.1)


# -- index ------------------------------------------------------------------------------------
def cmd_index(args: argparse.Namespace) -> int:
    from citewise.indexer import bm25
    from citewise.indexer.importer import ImportError_, expand_sources, import_sources

    store = _open_store(args, create=True)
    try:
        files = expand_sources(args.sources, args.format)
    except ImportError_ as exc:
        raise UserError(str(exc)) from exc
    if not files and args.sources:
        raise UserError("no importable files found (.bib, ACL Anthology .xml, .jsonl)")
    t0 = time.perf_counter()
    bar = _progress(None, "importing", " papers", args.quiet)
    problems_shown = 0

    def on_file(path: Path, stats) -> None:
        nonlocal problems_shown
        for problem in stats.problems:
            if problems_shown < args.max_problems:
                bar.write(f"warning: {problem}", file=sys.stderr)
            problems_shown += 1

    try:
        stats = import_sources(store, [str(p) for p, _ in files], fmt=args.format, on_record=lambda: bar.update(1),
                               on_file=on_file)
    except KeyboardInterrupt:
        bar.close()
        raise UserError("interrupted: the file being imported was rolled back; earlier files are kept") from None
    bar.close()
    elapsed = time.perf_counter() - t0
    if problems_shown > args.max_problems:
        print(f"... and {problems_shown - args.max_problems} more broken entries", file=sys.stderr)
    seen = sum(stats.as_dict()[k] for k in ("imported", "updated", "unchanged", "duplicates"))
    summary = {
        **stats.as_dict(),
        "files": len(files),
        "seconds": round(elapsed, 1),
        "papers_per_second": round(seen / elapsed, 1) if elapsed else 0.0,
    }
    if args.drop:
        for source in args.drop:
            resolved = str(Path(source).expanduser().resolve())
            summary["removed"] += store.drop_source(resolved)
    if not args.no_search_index:
        t1 = time.perf_counter()
        bar = _progress(store.count(), "search index", " papers", args.quiet)
        bm25.load_or_build(store, on_doc=lambda: bar.update(1), allow_delta=False)
        bar.close()
        summary["search_index_seconds"] = round(time.perf_counter() - t1, 1)
    if not args.no_embed:
        summary.update(_embed_store(store, args.quiet))
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{summary['imported']} imported, {summary['updated']} updated, {summary['unchanged']} unchanged, "
            f"{summary['duplicates']} duplicates merged, {summary['skipped']} skipped, {summary['broken']} broken, "
            f"{summary['removed']} removed; {len(files)} files in {elapsed:.1f} s "
            f"({summary['papers_per_second']:.0f} papers/s) -> {store.path}"
        )
    return 0


def _embed_store(store, quiet: bool) -> dict:
    """Embed new papers and update the ANN index when a HAtten model is installed (resumable)."""
    from citewise.indexer import ann

    t0 = time.perf_counter()
    bar = _progress(None, "embedding", " papers", quiet)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    try:
        info = ann.build_index(store, progress=progress)
    except KeyboardInterrupt:
        raise UserError("interrupted: embeddings done so far are kept; run `citewise index` again to resume") from None
    finally:
        bar.close()
    if info is None:
        return {}
    return {"embed_seconds": round(time.perf_counter() - t0, 1), "embedding": info}


# -- info -------------------------------------------------------------------------------------
def cmd_info(args: argparse.Namespace) -> int:
    from citewise.indexer import bm25

    store = _open_store(args)
    info = store.info()
    bm = bm25.BM25Index.load(bm25.index_folder(store))
    info["search_index"] = {
        "papers": bm.size if bm else 0,
        "up_to_date": bool(bm and bm.generation == store.generation),
    }
    info["models"] = _models_info(store)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"store:          {info['store']} ({info['size_bytes'] / 1e6:.1f} MB, schema {info['schema_version']})")
    print(f"papers:         {info['papers']} ({info['with_abstract']} with abstract, {info['with_doi']} with DOI)")
    print("entry types:    " + ", ".join(f"{k} {v}" for k, v in sorted(info["entry_types"].items(), key=lambda x: -x[1])))
    print(f"citations:      {info['citations']} ({info['resolved_citations']} resolved in the store)")
    print(f"sources:        {info['sources']}")
    si = info["search_index"]
    print(f"search index:   {si['papers']} papers, {'up to date' if si['up_to_date'] else 'stale (rebuilt on next use)'}")
    for name, desc in info["models"].items():
        print(f"model {name}:   {desc['folder']} ({desc['precision']}, {desc['size_mb']} MB), index {desc['index']}")
    return 0


def _models_info(store) -> dict:
    """The installed HAtten model and whether this store's embedding index is up to date."""
    from citewise.indexer import ann

    folder = ann.default_model_dir()
    if not (folder / "manifest.json").exists():
        return {}
    manifest = json.loads((folder / "manifest.json").read_text())
    index = ann.open_index(store)
    meta = index._meta() if index is not None else {}
    size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    return {
        "hatten": {
            "folder": str(folder),
            "precision": manifest.get("precision", ""),
            "base_vectors": manifest.get("base_vectors", manifest.get("embeddings", "")),
            "size_mb": round(size / 1e6, 1),
            "model_hash": index.encoder.model_hash if index is not None else "",
            "index": "up to date"
            if index is not None and meta.get("model_hash") == index.encoder.model_hash
            else "missing (run `citewise index`)",
            "fused_by_default": bool(manifest.get("fuse_by_default", False)),
        }
    }


# -- search -----------------------------------------------------------------------------------
def cmd_search(args: argparse.Namespace) -> int:
    from citewise.models.recommender import Recommender

    store = _open_store(args)
    if store.count() == 0:
        raise UserError(f"{store.path}: the store is empty (run `citewise index SOURCE` first)")
    rec = Recommender(store, prefetch_mode=args.prefetch)
    results = rec.search(args.query, args.k)
    if args.json:
        print(json.dumps([
            {"key": r.paper.key, "doi": r.paper.doi or None, "title": r.paper.title, "year": r.paper.year,
             "score": round(r.candidate.score, 6), "authors": r.paper.authors, "venue": r.paper.venue}
            for r in results
        ], ensure_ascii=False))
        return 0
    if not results:
        print("no matching papers")
    for i, r in enumerate(results, 1):
        authors = _short_authors(r.paper.authors)
        print(f"{i:3d}. {r.paper.title} ({r.paper.year or 'n.d.'})")
        print(f"     {authors}{' · ' + r.paper.venue if r.paper.venue else ''}")
        print(f"     key {r.paper.key}{'  doi ' + r.paper.doi if r.paper.doi else ''}  score {r.candidate.score:.4f}")
    return 0


def _short_authors(authors: list[str]) -> str:
    if not authors:
        return "unknown authors"
    last = [a.split(",")[0].strip() for a in authors]
    return last[0] + (" et al." if len(last) > 2 else (" and " + last[1] if len(last) == 2 else ""))


# -- parser -----------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="citewise",
        description="Citation recommendations from your own paper store, ranked by the sentence you write.",
    )
    parser.add_argument("--version", action="version", version=f"citewise {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    store_help = f"paper store file (default: $CITEWISE_STORE or {default_store_path()})"

    p = sub.add_parser("index", help="import BibTeX / ACL Anthology XML / JSON Lines into the store")
    p.add_argument("sources", nargs="*", metavar="SOURCE", help="files or folders (searched recursively)")
    p.add_argument("--store", help=store_help)
    p.add_argument("--format", choices=("bibtex", "acl-xml", "jsonl"), help="force the format")
    p.add_argument("--drop", action="append", metavar="SOURCE", help="forget a source file (repeatable)")
    p.add_argument("--no-search-index", action="store_true", help="skip (re)building the BM25 index")
    p.add_argument("--no-embed", action="store_true", help="skip embedding papers with the HAtten model")
    p.add_argument("--max-problems", type=int, default=20, help="broken entries to list (default 20)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("info", help="counts, sizes and models of the store")
    p.add_argument("--store", help=store_help)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("search", help="search the store by words, authors or a sentence")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=10, help="number of results (default 10)")
    p.add_argument("--store", help=store_help)
    p.add_argument("--prefetch", choices=("auto", "bm25", "hatten", "hybrid"), default="auto")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_search)

    for register in _extra_registrations():
        register(sub)
    return parser


def _extra_registrations() -> list[Callable[[argparse._SubParsersAction], None]]:
    """Subcommands owned by other modules (eval, suggest, serve, train, export)."""
    out = []
    for module in ("citewise.cli_eval", "citewise.cli_server", "citewise.cli_models"):
        try:
            mod = __import__(module, fromlist=["register"])
        except ImportError:
            continue
        out.append(mod.register)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"citewise: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("citewise: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        from citewise.indexer.store import StoreError

        if isinstance(exc, StoreError | OSError) and not os.environ.get("CITEWISE_DEBUG"):
            print(f"citewise: error: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    # Run through the installed module so ``UserError`` is the one subcommand modules raise
    # (under ``-m`` this file is ``__main__`` and its classes are copies).
    from citewise.cli import main as _main

    sys.exit(_main())
