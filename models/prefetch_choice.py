"""Which prefetch a recommender runs when the one asked for cannot run: decided once, here.

``dense`` and ``hybrid`` need the store's dense index (``citewise index --embed`` with a model
installed). A store without one used to fail differently at each front end: a traceback from
``citewise search``, a message and BM25 in the server, an error in ``citewise eval``. Each now asks
:func:`choose_prefetch` and acts on its answer in its own way: the server shows the notice and
ranks with ``auto``, ``citewise search`` prints it and does the same, and ``citewise eval`` refuses
(a measurement of a mode that did not run would be a wrong figure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from citewise.errors import CitewiseError

if TYPE_CHECKING:
    from .recommender import Recommender

NEEDS_DENSE = ("dense", "hybrid")


class DenseIndexMissing(CitewiseError):
    """A dense prefetch was asked for and the store has no dense index."""


@dataclass(frozen=True)
class PrefetchChoice:
    """The prefetch mode to run, and why it differs from the one asked for (None when it does not)."""

    mode: str
    notice: str | None = None

    def required(self) -> str:
        """The mode, or :class:`DenseIndexMissing` when it is not the one asked for."""
        if self.notice:
            raise DenseIndexMissing(self.notice)
        return self.mode


def choose_prefetch(requested: str, rec: Recommender, store_label: str) -> PrefetchChoice:
    """``requested`` when the store can run it; else ``auto`` with a notice naming the store and the
    command that adds a dense index."""
    if requested in NEEDS_DENSE and rec.dense is None:
        return PrefetchChoice(
            "auto",
            f"prefetch '{requested}' needs a dense index for the store {store_label}, which it does not "
            "have; using BM25. Run `citewise index --embed` (a dense model installed).",
        )
    return PrefetchChoice(requested)
