"""What the ACL dev protocol's store may know of how papers are cited: the honest split.

Why: the ACL dev queries are ScisummNet sentences of citing papers published in 2013 and 2014.
A user's draft is written after everything in their store, so the store must know how papers are
cited only from papers written *before* the draft: no citing sentence, citing title or edge whose
citing paper is of the first dev year or later (2015 papers citing the same classics included),
nor from a dev paper itself. Rules tuned on a store that knew later citers learned the leak, not
the field: on sentences of unseen 2020-24 papers they measured lower than without them.

The earlier rule (:func:`leaky_keep`: only the dev years' citers left out) is kept for the parity
check with figures measured before, never for choosing a default.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from citewise.indexer.citations import CitationEdge

from .citances import DEV_YEARS, acl_year, is_acl_dev, read_jsonl

FIRST_DEV_YEAR = min(DEV_YEARS)


@dataclass(frozen=True)
class HonestSplit:
    """Keeps an edge only when its citing paper is known to predate the dev years and is not one
    of the dev papers, and its sentence is none of the queried ones. A citing id without a
    readable year is left out: nothing shows it is older. (Two older papers wrote a sentence word
    for word as a dev paper did, their authors' own: the queried text must not be in the store.)"""

    dev_papers: frozenset[str]
    dev_texts: frozenset[str] = frozenset()  # the queried sentences, whitespace-normalised
    first_year: int = FIRST_DEV_YEAR

    def keep(self, edge: CitationEdge) -> bool:
        return self.keeps_citing(edge.citing) and _norm(edge.context) not in self.dev_texts

    def keeps_citing(self, citing: str) -> bool:
        if citing in self.dev_papers:
            return False
        year = acl_year(citing)
        return year is not None and year < self.first_year


def _norm(text: str) -> str:
    return " ".join(text.split())


def honest_split(citances_path: str | Path) -> HonestSplit:
    """The honest split for the ScisummNet file at ``citances_path``: its dev sentences' citing
    papers and texts."""
    dev = [row for row in read_jsonl(citances_path) if is_acl_dev(row["citing"])]
    return HonestSplit(frozenset(r["citing"] for r in dev), frozenset(_norm(r["text"]) for r in dev))


def leaky_keep(edge: CitationEdge) -> bool:
    """The earlier rule, for the parity check only: the dev years' citers left out, later ones kept."""
    return not is_acl_dev(edge.citing)


def leaks(citing_ids: Iterable[str], split: HonestSplit) -> list[str]:
    """The citing ids among ``citing_ids`` that the honest split would have left out (sorted):
    what a test asserts is empty for a store built under it."""
    return sorted({c for c in citing_ids if not split.keeps_citing(c)})
