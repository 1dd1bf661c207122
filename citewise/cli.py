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
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import __version__, cli_check, cli_eval, cli_server, cli_vscode
from .cli_common import (
    UserError,
    add_prefetch_argument,
    empty_store_error,
    open_store,
    positive_int,
    query_text,
    store_path,
)
from .cli_engine import add_engine_argument
from .cli_fetch import register as register_fetch
from .cli_index import register as register_index
from .errors import CitewiseError
from .settings import default_store_path

if TYPE_CHECKING:  # imported where used: `citewise --help` must not load the indexer
    from citewise.indexer.store_summary import Grouping, SourceSummary


# -- info -------------------------------------------------------------------------------------
def cmd_info(args: argparse.Namespace) -> int:
    from citewise.indexer import bm25_files
    from citewise.indexer.citations import citation_edge_count
    from citewise.indexer.store_summary import citation_words, sources_words

    store = open_store(args)
    info = store.info()
    info["citation_edges"] = citation_edge_count(store)  # rows: one per citing sentence
    by: Grouping = "file" if args.by_file else "kind"
    totals = _source_counts(store, info, by)
    bm, problem = bm25_files.load_checked(bm25_files.index_folder(store))
    info["search_index"] = {
        "papers": bm.size if bm else 0,
        "up_to_date": bool(bm and bm.generation == store.generation),
        "damaged": problem,
        # In `citewise index`'s words: missing, damaged, outdated, stale or up to date, and why.
        **_index_state(store, problem),
    }
    if problem:
        print(
            f"citewise: warning: {bm25_files.index_folder(store)}: search index damaged ({problem}); "
            "it is rebuilt by the next `citewise search` or `citewise index`",
            file=sys.stderr,
        )
    info["models"] = _models_info(store)
    info["citing_vectors"] = _citing_info(store)
    info["moved_sources"] = store.moved_sources()
    if info["papers"] == 0:
        print(f"citewise: note: {empty_store_error(store)}", file=sys.stderr)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(
        f"store:          {info['store']} ({info['size_bytes'] / 1e6:.1f} MB, schema {info['schema_version']})"
    )
    print(
        f"papers:         {info['papers']:,} ({info['with_abstract']:,} with abstract, {info['with_doi']:,} with DOI)"
    )
    print(
        "entry types:    "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(info["entry_types"].items(), key=lambda x: -x[1]))
    )
    print(f"citations:      {citation_words(totals)}")
    print(f"sources:        {sources_words(info['source_kinds'])}")
    _print_sources(info["by_source"]["sources"], by)
    _print_moved(info["moved_sources"])
    si = info["search_index"]
    again = "built" if si["state"] == "missing" else "rebuilt"
    state = "up to date" if si["up_to_date"] else f"{si['state']} ({si['why']}): {again} on next use"
    print(f"search index:   {si['papers']:,} papers, {state}")
    _print_models(info)
    return 0


def _print_moved(moved: list[dict]) -> None:
    """The drafts' bibliographies an upgrade took out of the shared store (``workspace_sources``):
    where they went, and how to share one again."""
    if not moved:
        return
    papers = sum(m["removed"] for m in moved)
    print(
        f"moved:          {len(moved)} .bib file(s) beside drafts that an earlier editor server imported; "
        f"{papers:,} of their papers left the shared store (each file still serves its own draft; "
        "`citewise index FILE` shares one again):"
    )
    for m in moved:
        print(f"                {m['path']} ({m['papers']} entries, {m['removed']} papers removed)")


def _index_state(store, problem: str) -> dict[str, str]:
    """The search index's state and why (``cli_index_summary.search_index_state``); a damage
    found by the full load (``problem``) is said as such."""
    from .cli_index_summary import search_index_state

    if problem:
        return {"state": "damaged", "why": problem}
    return search_index_state(store).as_dict()


def _source_counts(store, info: dict, by: Grouping) -> SourceSummary:
    """What each source gave (``info["by_source"]``), the files by kind (``source_kinds``) and
    the whole store's counts in the import summary's words (``counts``; returned too): each
    paper, reference and pair once, however many sources hold it."""
    from citewise.indexer.store_summary import source_kinds, summarize_sources, summarize_total

    rows = summarize_sources(store, by)
    info["by_source"] = {"by": by, "sources": [s.as_dict() for s in rows]}
    info["source_kinds"] = source_kinds(store)
    # One kind of source: its row is the store's total (a second pass costs a second on ACM-CR).
    totals = summarize_total(store) if by == "file" or len(rows) != 1 else rows[0]
    info["counts"] = totals.counts()
    return totals


def _print_models(info: dict) -> None:
    """The dense models' lines of ``citewise info``, and the ``cited-as`` list's."""
    for name, desc in info["models"].items():
        print(
            f"model {name}:   {desc['folder']} ({', '.join(x for x in (desc.get('kind', ''), desc['precision']) if x)}, "
            f"{desc['size_mb']} MB), index {desc['index']}"
        )
        if desc.get("teacher_rescore_head"):
            print(
                f"                its top {desc['teacher_rescore_head']} re-scored by the bi-encoder it was distilled from"
            )
    cv = info["citing_vectors"]
    if cv and not cv["papers"] and not cv["up_to_date"]:
        print("cited-as list:  not built (run `citewise index` to embed the citing texts)")
    elif cv:
        print(
            f"cited-as list:  {cv['papers']} cited papers by their {cv['texts']} citing texts (bi-encoder), "
            f"{'up to date' if cv['up_to_date'] else 'stale (run `citewise index`)'}"
        )
        if info["models"].get("dense", {}).get("index") == "up to date":
            print("                the dense paper list answers the sentences it steps aside for")


def _citing_info(store) -> dict:
    """The citing vectors' summary (``models/citing_vectors.py``), {} when the store has none."""
    from citewise.models import citing_vectors

    meta = citing_vectors.read_meta(store)
    if not meta:
        from citewise.models.citation_prior import store_knows_citations

        # A store that knows citations but was indexed before the list existed (or interrupted).
        return {"papers": 0, "texts": 0, "up_to_date": False} if store_knows_citations(store) else {}
    return {
        "papers": meta.get("papers", 0),
        "texts": meta.get("texts", 0),
        "up_to_date": citing_vectors.is_current(store, str(meta.get("model_hash", ""))),
    }


def _print_sources(rows: list[dict], by: str) -> None:
    """What each source (kind or file) gave: a table whose name column comes last, so a long
    path does not push the figures apart."""
    if not rows:
        return
    print(
        f"  {'papers':>10} {'abstracts':>10} {'citation edges':>14} {'resolved':>8} {'citing sentences':>16}  {by}"
    )
    for row in rows:
        share = row["resolved_share"]
        name = (
            row["name"]
            if by == "file" or row["name"].startswith("fetch:")  # fetched: an API, not files
            else f"{row['name']} ({row['files']} {'file' if row['files'] == 1 else 'files'})"
        )
        print(
            f"  {row['papers']:>10,} {row['abstracts']:>10,} {row['edges']:>14,} "
            f"{'-' if share is None else f'{share:.1%}':>8} {row['sentences']:>16,}  {name}"
        )


def _models_info(store) -> dict:
    """The installed dense model and whether this store's embedding index is up to date."""
    from citewise.models import dense_index

    folder = dense_index.model_dir_for(store)
    if not (folder / "manifest.json").exists():
        return {}
    try:
        manifest = dense_index.verify_model(folder)
        index = dense_index.open_index(store, folder)  # the folder chosen above, not chosen again
    except dense_index.ModelError as exc:
        print(f"citewise: warning: {exc}", file=sys.stderr)
        return {
            "dense": {
                "folder": str(folder),
                "precision": "?",
                "size_mb": 0,
                "index": "unusable (model damaged)",
                "error": str(exc),
            }
        }
    meta = index._meta() if index is not None else {}
    size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    # Where the store knows how its papers are cited, the dense paper list is fused (and its head
    # re-scored) only for the sentences its cited-as list steps aside for, and not at all where the
    # store cites more papers than that list holds: BM25 reads the citing texts (Recommender.mode).
    from citewise.models.citation_prior import store_outgrows_cited_as

    unused = store_outgrows_cited_as(store)
    current = index is not None and meta.get("model_hash") == index.encoder.model_hash
    return {
        "dense": {
            "folder": str(folder),
            "precision": manifest.get("precision", ""),
            "kind": manifest["kind"],
            "base_vectors": manifest.get(
                "base_vectors", manifest.get("embeddings", manifest.get("base", ""))
            ),
            "size_mb": round(size / 1e6, 1),
            "model_hash": index.encoder.model_hash if index is not None else "",
            "index": "not used: the store cites more papers than its cited-as list holds (BM25 reads how)"
            if unused
            else ("up to date" if current else "missing (run `citewise index --embed`)"),
            "fused_by_default": bool(manifest.get("fuse_by_default", False)) and not unused,
            # its fused top N re-scored by the bi-encoder it was distilled from (models/teacher_rescore.py)
            "teacher_rescore_head": 0 if unused else int(manifest.get("rescore_head", 0) or 0),
        }
    }


# -- search -----------------------------------------------------------------------------------
def cmd_search(args: argparse.Namespace) -> int:
    from citewise.models.prefetch_choice import choose_prefetch
    from citewise.models.recommender import Recommender

    store = open_store(args)
    if store.count() == 0:
        raise empty_store_error(store)
    rec = Recommender(store, prefetch_mode=args.prefetch, engine=args.engine)
    choice = choose_prefetch(args.prefetch, rec, str(store_path(args)))
    if choice.notice:
        print(f"citewise: {choice.notice}", file=sys.stderr)
        rec.prefetch_mode = choice.mode
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

    register_index(sub, store_help)
    register_fetch(sub, store_help)

    p = sub.add_parser("info", help="counts, sizes and models of the store, and what each source gave it")
    p.add_argument("--store", help=store_help)
    p.add_argument(
        "--by-file",
        action="store_true",
        help="papers, abstracts, edges and citing sentences per imported file (default: per kind of source)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("search", help="search the store by words, authors or a sentence")
    p.add_argument("query", type=query_text)
    p.add_argument("-k", type=positive_int, default=10, help="number of results (default 10)")
    p.add_argument("--store", help=store_help)
    add_prefetch_argument(p)
    p.add_argument("--json", action="store_true")
    add_engine_argument(p)
    p.set_defaults(func=cmd_search)

    cli_eval.register(sub)
    cli_server.register(sub)
    cli_check.register(sub)
    cli_vscode.register(sub)
    _register_training(sub)
    return parser


def _register_training(sub: argparse._SubParsersAction) -> None:
    """``citewise train`` and ``citewise export`` (the old names of ``python -m training``).

    Training and export are not part of the installed package (they live in the checkout's
    ``training/`` folder and need the ``train`` extra), so these forward to it where it can be
    imported (``python -m citewise`` from a checkout) and otherwise say where it went."""
    for name, what in (("train", "train a model"), ("export", "export a trained model to ONNX")):
        p = sub.add_parser(
            name, help=f"{what} (from a source checkout: python -m training {name} ...)", add_help=False
        )
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=_run_training, training_command=name)


def _run_training(args: argparse.Namespace) -> int:
    try:
        from training.cli import main as training_main
    except ModuleNotFoundError as exc:
        if exc.name != "training":
            raise
        raise UserError(
            f"`citewise {args.training_command}` moved: training is not part of the installed package; "
            f"from a citewise checkout run `python -m training {args.training_command} ...` "
            "(with the train extra: pip install -e '.[train]')"
        ) from None
    print(
        f"citewise: note: `citewise {args.training_command}` is deprecated; use `python -m training "
        f"{args.training_command}`",
        file=sys.stderr,
    )
    return training_main([args.training_command, *args.rest])


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
    if args.command in (
        "index",
        "fetch",
        "info",
        "search",
        "check",
    ):  # serve configures its own (LSP) logging
        configure_logging()
    debug = bool(os.environ.get("CITEWISE_DEBUG"))
    try:
        return int(args.func(args) or 0)
    except CitewiseError as exc:
        if debug:
            raise
        print(f"citewise: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("citewise: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``citewise info | head``): not an error, as for cat or grep. Point
        # stdout at /dev/null so the interpreter's final flush does not report it either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:
        import sqlite3

        if debug:
            raise
        if isinstance(exc, OSError):
            print(f"citewise: error: {exc}", file=sys.stderr)
            return 1
        if isinstance(exc, sqlite3.DatabaseError) and getattr(args, "command", "") in (
            "index",
            "info",
            "search",
        ):
            # Damage found past the opening checks (a page in the middle of the file).
            from citewise.indexer.store_open import damaged

            print(f"citewise: error: {damaged(store_path(args), exc)}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
