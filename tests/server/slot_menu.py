"""The menu a slot with a sentence gets, as the completion handler builds it (``completion.slot.order``),
for the pure tests of the completion entries."""

from __future__ import annotations

from collections.abc import Collection

from citewise.models.query import ContextQuery
from citewise.models.recommender import Recommendation
from citewise.server.bibindex import BibIndex, PaperKey, key_for_paper
from citewise.server.completion.slot import order


def menu_order(
    items: list[Recommendation], bib: BibIndex, key_style: str, cited: Collection[str] = frozenset()
) -> list[tuple[Recommendation, PaperKey]]:
    """``items`` in the menu's order with their keys: nothing typed, no cut, the ``.bib`` lift applied."""
    keyed, _more = order(
        items,
        ContextQuery("a sentence of its own"),
        bib,
        "",
        len(items),
        key_of=lambda p: key_for_paper(p, bib, key_style),
        lookup=lambda _key, _ids: None,
        cited=cited,
    )
    return keyed
