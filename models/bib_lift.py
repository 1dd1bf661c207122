"""How far a paper of the draft's own ``.bib`` rises in a ranked list: one rule, for every front end.

Why a rule of its own: that the author already holds a paper is evidence that they mean to cite
it, but weak evidence for any one sentence: a draft's ``.bib`` holds the papers of every sentence,
so for the sentence at hand most of them are beside the point. A ``.bib`` paper that the sentence
ranks a little lower than a stranger may pass it; one that the sentence ranks far down must not
leap to the top, and a paper just cited for one sentence must not lead the list of the next.
``docs/own-bibliography-ranking.md`` has the rules measured and why :data:`ADOPTED` won.

Pure: no store, no LSP types; the completion menu and the code actions
(``server/completion/slot.py``, ``server/actions.py``) order their lists with :func:`lift`, so both
show the same order for the same list, and ``evaluation/bib_lift.py`` measures the same function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

NONE = "none"
WINDOW = "window"
PLACES = "places"
FUSION = "fusion"


@dataclass(frozen=True)
class LiftRule:
    """One way of lifting ``.bib`` papers over the others; the order within each group is kept.

    * ``none``: the ranking as it is.
    * ``window`` (``n``): the ``.bib`` papers among the first ``n`` come first.
    * ``places`` (``n``): a ``.bib`` paper passes at most ``n`` papers that are not in the ``.bib``.
    * ``fusion`` (``k``, ``weight``): score ``1/(k + rank) + weight`` for a ``.bib`` paper,
      ``1/(k + rank)`` for another (rank from 1), highest first: a reciprocal-rank bonus, which lets
      a ``.bib`` paper pass fewer places near the top of the list than further down.
    """

    kind: str = NONE
    n: int = 0  # window: how many of the first papers; places: how many strangers passed
    k: int = 60
    weight: float = 0.0

    @property
    def name(self) -> str:
        if self.kind == WINDOW:
            return f"window {self.n}"
        if self.kind == PLACES:
            return f"up {self.n} place{'s' if self.n != 1 else ''}"
        if self.kind == FUSION:
            return f"1/({self.k}+rank) + {self.weight:g}"
        return NONE


ADOPTED = LiftRule(WINDOW, n=2)
"""The rule both front ends use: of the sentence's first two papers, the ``.bib``'s comes first;
nothing else moves. Measured in ``docs/own-bibliography-ranking.md``: it keeps most of what a lift
gains where the ``.bib`` holds the sentence's paper, and it bounds the harm where it does not (the
sentence's own first paper drops to second at worst, the top 5 and top 10 never change)."""


def _keys(rule: LiftRule, flags: Sequence[bool]) -> list[tuple[float, int]]:
    """Sort keys of the items whose ``.bib`` flags are ``flags`` (best first); lower sorts first,
    a tie goes to the ``.bib`` paper (``0`` before ``1``), then the ranking decides (a stable sort)."""
    out: list[tuple[float, int]] = []
    strangers = 0  # papers not in the .bib ranked above the current one
    for rank, mine in enumerate(flags):
        if rule.kind == WINDOW:
            out.append((0.0 if mine and rank < rule.n else 1.0, 0))
        elif rule.kind == PLACES:
            # A .bib paper goes just above the stranger n places up the strangers' own order.
            out.append((float(strangers - rule.n), 0) if mine else (float(strangers), 1))
        elif rule.kind == FUSION:
            out.append((-(1.0 / (rule.k + rank + 1) + (rule.weight if mine else 0.0)), 0))
        else:
            out.append((float(rank), 0))
        strangers += not mine
    return out


def lift(ranked: Sequence[T], in_bib: Callable[[T], bool], rule: LiftRule = ADOPTED) -> list[T]:
    """``ranked`` (best first) reordered by ``rule``: ``.bib`` papers (``in_bib``) rise over the
    others as far as the rule lets them, and neither group changes its own order."""
    keys = _keys(rule, [in_bib(x) for x in ranked])
    order = sorted(range(len(ranked)), key=lambda i: (keys[i], i))
    return [ranked[i] for i in order]
