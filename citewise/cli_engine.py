"""``--engine`` for ``index``, ``search``, ``suggest`` and ``eval``: which search engine serves the
store (``local``, a Milvus cluster, a Milvus Lite file; see ``indexer/engine.py``).

Kept apart from ``cli.py``: the flag is shared by four subcommands in three modules, and
``index --engine`` has its own step (copy the store to the engine, with progress and resume).
"""

from __future__ import annotations

import argparse
import sys

ENGINE_HELP = (
    "search engine: local (default: the index beside the store), milvus://HOST:PORT/COLLECTION "
    "(a Milvus server), or milvus-lite:PATH.db[#COLLECTION] (a Milvus Lite file); "
    "needs the milvus extra for Milvus"
)


def engine_arg(text: str) -> str:
    """A checked ``--engine`` value (a bad one is a usage error, exit 2). ``local`` is checked
    without importing the engine module, so commands that do not use Milvus start as fast as before."""
    if text.strip() == "local":
        return "local"
    from citewise.indexer.engine import EngineError, parse_engine

    try:
        return str(parse_engine(text))
    except EngineError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_engine_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", type=engine_arg, default="local", metavar="ENGINE", help=ENGINE_HELP)


def sync_to_engine(store, spec: str, quiet: bool) -> dict:
    """``index --engine``: copy the store's papers (and vectors, when it has an embedding index) to
    the engine under a progress bar; papers already there are skipped, so a rerun resumes."""
    from citewise.indexer.engine import EngineError
    from citewise.models.engines import sync_engine

    from .cli_common import UserError, progress_bar

    bar = progress_bar(store.count(), f"writing to {spec}", " papers", quiet)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    try:
        return sync_engine(store, spec, progress)
    except KeyboardInterrupt:
        raise UserError(
            f"interrupted: papers written to {spec} so far are kept; run the same command again to resume"
        ) from None
    except EngineError as exc:
        raise UserError(str(exc)) from exc
    finally:
        bar.close()
        if not quiet:
            sys.stderr.flush()


def engine_summary(done: dict) -> str:
    """The line ``index --engine`` prints after the import's: what was written where."""
    return (
        f"{done['inserted']} written, {done['updated']} rewritten, {done['deleted']} deleted, "
        f"{done['unchanged']} already there{', dense vectors' if done.get('dense') else ''}; "
        f"{done['papers']} papers in {done['engine']} ({done['seconds']:.1f} s)"
    )
