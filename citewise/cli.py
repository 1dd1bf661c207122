"""The ``citewise`` command: index, search, suggest, eval, train, export, serve, info.

A user's mistake (a missing file, a bad flag, a broken store) prints one clear line to stderr
and exits non-zero; tracebacks are for our bugs only (``CITEWISE_DEBUG=1`` shows them always).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from . import __version__
from .cli_engine import add_engine_argument
from .settings import default_store_path


class UserError(Exception):
    """A problem the user can fix; printed without a traceback."""


def _store_path(args: argparse.Namespace) -> Path:
    return Path(args.store).expanduser() if getattr(args, "store", None) else default_store_path()


def _open_store(args: argparse.Namespace, create: bool = False, write: bool = False):
    """The store of ``--store``. Only ``index`` creates one (and says so); a store that cannot be
    written opens read-only with a note, and ``index`` (``write``) refuses it with the reason."""
    from citewise.indexer.store import Store

    store = Store(_store_path(args), create=create)
    if write and store.readonly:
        raise UserError(
            f"{store.path}: cannot write to the store ({store.readonly_reason}); "
            "make it writable or pass another --store"
        )
    if store.readonly:
        print(f"citewise: note: {store.path}: opened read-only ({store.readonly_reason})", file=sys.stderr)
    return store


def _empty_store_error(store) -> UserError:
    return UserError(
        f"{store.path}: the store is empty; add papers with `citewise index FILE --store {store.path}`"
    )


def _positive_int(text: str) -> int:
    """``-k`` and friends: a whole number of at least 1 (0 or -3 is a usage error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _query(text: str) -> str:
    """A search query with at least one visible character (``search ""`` is a usage error)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty query: give words of a title, an author or a sentence")
    return text


def _progress(total: int | None, desc: str, unit: str, quiet: bool):
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        disable=quiet or None,
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=0.5,
        smoothing=0.1,
    )


# -- info -------------------------------------------------------------------------------------
def cmd_info(args: argparse.Namespace) -> int:
    from citewise.indexer import bm25_files
    from citewise.indexer.citations import citation_edge_count

    store = _open_store(args)
    info = store.info()
    info["citation_edges"] = citation_edge_count(store)
    bm, problem = bm25_files.load_checked(bm25_files.index_folder(store))
    info["search_index"] = {
        "papers": bm.size if bm else 0,
        "up_to_date": bool(bm and bm.generation == store.generation),
        "damaged": problem,
    }
    if problem:
        print(
            f"citewise: warning: {bm25_files.index_folder(store)}: search index damaged ({problem}); "
            "it is rebuilt by the next `citewise search` or `citewise index`",
            file=sys.stderr,
        )
    info["models"] = _models_info(store)
    if info["papers"] == 0:
        print(f"citewise: note: {_empty_store_error(store)}", file=sys.stderr)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(
        f"store:          {info['store']} ({info['size_bytes'] / 1e6:.1f} MB, schema {info['schema_version']})"
    )
    print(
        f"papers:         {info['papers']} ({info['with_abstract']} with abstract, {info['with_doi']} with DOI)"
    )
    print(
        "entry types:    "
        + ", ".join(f"{k} {v}" for k, v in sorted(info["entry_types"].items(), key=lambda x: -x[1]))
    )
    print(f"citations:      {info['citations']} ({info['resolved_citations']} resolved in the store)")
    if info["citation_edges"]:
        print(
            f"citation files: {info['citation_edges']} edges (citing sentences and titles index the cited papers)"
        )
    print(f"sources:        {info['sources']}")
    si = info["search_index"]
    print(
        f"search index:   {si['papers']} papers, {'up to date' if si['up_to_date'] else 'stale (rebuilt on next use)'}"
    )
    for name, desc in info["models"].items():
        print(
            f"model {name}:   {desc['folder']} ({desc['precision']}, {desc['size_mb']} MB), index {desc['index']}"
        )
    return 0


def _models_info(store) -> dict:
    """The installed HAtten model and whether this store's embedding index is up to date."""
    from citewise.models import dense_index

    folder = dense_index.default_model_dir()
    if not (folder / "manifest.json").exists():
        return {}
    try:
        manifest = dense_index.verify_model(folder)
        index = dense_index.open_index(store)
    except dense_index.ModelError as exc:
        print(f"citewise: warning: {exc}", file=sys.stderr)
        return {
            "hatten": {
                "folder": str(folder),
                "precision": "?",
                "size_mb": 0,
                "index": "unusable (model damaged)",
                "error": str(exc),
            }
        }
    meta = index._meta() if index is not None else {}
    size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    return {
        "hatten": {
            "folder": str(folder),
            "precision": manifest.get("precision", ""),
            "kind": manifest.get("kind", "hatten"),
            "base_vectors": manifest.get(
                "base_vectors", manifest.get("embeddings", manifest.get("base", ""))
            ),
            "size_mb": round(size / 1e6, 1),
            "model_hash": index.encoder.model_hash if index is not None else "",
            "index": "up to date"
            if index is not None and meta.get("model_hash") == index.encoder.model_hash
            else "missing (run `citewise index --embed`)",
            "fused_by_default": bool(manifest.get("fuse_by_default", False)),
        }
    }


# -- search -----------------------------------------------------------------------------------
def cmd_search(args: argparse.Namespace) -> int:
    from citewise.models.recommender import Recommender

    store = _open_store(args)
    if store.count() == 0:
        raise _empty_store_error(store)
    rec = Recommender(store, prefetch_mode=args.prefetch, engine=args.engine)
    results = rec.search(args.query, args.k)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "key": r.paper.key,
                        "doi": r.paper.doi or None,
                        "title": r.paper.title,
                        "year": r.paper.year,
                        "score": round(r.candidate.score, 6),
                        "authors": r.paper.authors,
                        "venue": r.paper.venue,
                    }
                    for r in results
                ],
                ensure_ascii=False,
            )
        )
        return 0
    if not results:
        print("no matching papers")
    for i, r in enumerate(results, 1):
        authors = _short_authors(r.paper.authors)
        print(f"{i:3d}. {r.paper.title} ({r.paper.year or 'n.d.'})")
        print(f"     {authors}{' · ' + r.paper.venue if r.paper.venue else ''}")
        print(
            f"     key {r.paper.key}{'  doi ' + r.paper.doi if r.paper.doi else ''}  score {r.candidate.score:.4f}"
        )
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

    from .cli_index import register as register_index  # it imports this module

    register_index(sub, store_help)

    p = sub.add_parser("info", help="counts, sizes and models of the store")
    p.add_argument("--store", help=store_help)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("search", help="search the store by words, authors or a sentence")
    p.add_argument("query", type=_query)
    p.add_argument("-k", type=_positive_int, default=10, help="number of results (default 10)")
    p.add_argument("--store", help=store_help)
    p.add_argument("--prefetch", choices=("auto", "bm25", "hatten", "hybrid"), default="auto")
    p.add_argument("--json", action="store_true")
    add_engine_argument(p)
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


class _StderrHandler(logging.Handler):
    """Log records as ``citewise: warning: ...`` on the *current* stderr (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"citewise: {record.levelname.lower()}: {self.format(record)}\n")
        except Exception:  # pragma: no cover - logging must never break a command
            self.handleError(record)


def configure_logging() -> None:
    """``CITEWISE_LOG`` (default WARNING) for the ``citewise`` loggers, each record with its level.

    Info stays info: records print as ``citewise: info: ...``, never as errors, and a bad level
    name is a warning rather than a traceback."""
    logger = logging.getLogger("citewise")
    handler = next((h for h in logger.handlers if isinstance(h, _StderrHandler)), None)
    if handler is None:
        # Records still propagate (to pytest's capture, say); the root has no handler in the CLI,
        # so nothing prints twice.
        handler = _StderrHandler()
        logger.addHandler(handler)
    raw = os.environ.get("CITEWISE_LOG", "")
    level = logging.getLevelName(raw.strip().upper()) if raw else logging.WARNING
    if not isinstance(level, int):
        handler.setLevel(logging.WARNING)
        logger.warning(
            "CITEWISE_LOG=%s is not a level (use DEBUG, INFO, WARNING or ERROR); using WARNING", raw
        )
        return
    handler.setLevel(level)
    if raw:  # only an explicit setting changes the logger (in-process callers keep theirs)
        logger.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if args.command in ("index", "info", "search"):  # serve configures its own (LSP) logging
        configure_logging()
    debug = bool(os.environ.get("CITEWISE_DEBUG"))
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"citewise: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("citewise: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        import sqlite3

        from citewise.indexer.engine import EngineError
        from citewise.indexer.store import StoreError

        if debug:
            raise
        if isinstance(exc, StoreError | OSError | EngineError):
            print(f"citewise: error: {exc}", file=sys.stderr)
            return 1
        if isinstance(exc, sqlite3.DatabaseError) and getattr(args, "command", "") in (
            "index",
            "info",
            "search",
        ):
            # Damage found past the opening checks (a page in the middle of the file).
            from citewise.indexer.store_open import damaged

            print(f"citewise: error: {damaged(_store_path(args), exc)}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    # Run through the installed module so ``UserError`` is the one subcommand modules raise
    # (under ``-m`` this file is ``__main__`` and its classes are copies).
    from citewise.cli import main as _main

    sys.exit(_main())
