"""What every ``citewise`` subcommand shares: the user-error type, the store of ``--store``,
argument types and the progress bar.

Why a module of its own: the subcommand modules (``cli_index``, ``cli_eval``, ``cli_server``,
``cli_engine``) and :mod:`citewise.cli`, which registers them, all need these; kept here, the
imports run one way (``cli`` -> subcommands -> ``cli_common``) and nothing imports ``cli`` back.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import deprecated
from .errors import CitewiseError
from .settings import PREFETCH_MODES, default_store_path


class UserError(CitewiseError):
    """A problem the user can fix; printed without a traceback."""


def store_path(args: argparse.Namespace) -> Path:
    return Path(args.store).expanduser() if getattr(args, "store", None) else default_store_path()


def open_store(args: argparse.Namespace, create: bool = False, write: bool = False):
    """The store of ``--store``. Only ``index`` creates one (and says so); a store that cannot be
    written opens read-only with a note, and ``index`` (``write``) refuses it with the reason."""
    from citewise.indexer.store import Store

    store = Store(store_path(args), create=create)
    if write and store.readonly:
        raise UserError(
            f"{store.path}: cannot write to the store ({store.readonly_reason}); "
            "make it writable or pass another --store"
        )
    if store.readonly:
        print(f"citewise: note: {store.path}: opened read-only ({store.readonly_reason})", file=sys.stderr)
    return store


def empty_store_error(store) -> UserError:
    return UserError(
        f"{store.path}: the store is empty; add papers with `citewise index FILE --store {store.path}`"
    )


def positive_int(text: str) -> int:
    """``-k`` and friends: a whole number of at least 1 (0 or -3 is a usage error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def query_text(text: str) -> str:
    """A search query with at least one visible character (``search ""`` is a usage error)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty query: give words of a title, an author or a sentence")
    return text


def add_prefetch_argument(p: argparse.ArgumentParser) -> None:
    """``--prefetch``, shared by ``search`` and ``eval`` so both take the same modes.

    The old name ``hatten`` is converted to ``dense`` (with a one-line notice) before argparse
    checks the choice, so it still works for one release without showing in ``--help``."""
    p.add_argument(
        "--prefetch",
        type=deprecated.prefetch_mode,
        choices=PREFETCH_MODES,
        default="auto",
        help="first stage: auto (default: BM25, fused with the dense model where the store is embedded "
        "and the model's fusion measured better), bm25, dense (the dense model alone) or hybrid (BM25 "
        "and the dense model, fused)",
    )


def progress_bar(total: int | None, desc: str, unit: str, quiet: bool, **options):
    """A progress bar on stderr (none with ``quiet``, or when stderr is not a terminal);
    ``options`` go to tqdm (``unit_scale=True`` for a bar counting bytes)."""
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
        **options,
    )
