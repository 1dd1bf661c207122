"""The store's papers as the front ends look them up: by id, by cite key, by a .bib entry's identifiers.

Why an object of its own: the language server and the CLI need papers (to show, to key, to
insert) but must not know how the store finds them; one place decides the order in which a
``.bib`` entry's identifiers identify a stored paper (DOI, then arXiv id, then title, then key).
"""

from __future__ import annotations

from collections.abc import Iterable

from citewise.indexer.store import Store, StoredPaper
from citewise.indexer.store_summary import SourceSummary, summarize_sources


class Library:
    """Read-only look-ups over a :class:`Store` (thread-safe: the store keeps one connection a thread)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def get(self, paper_id: int) -> StoredPaper | None:
        return self._store.get(paper_id)

    def get_many(self, ids: Iterable[int]) -> dict[int, StoredPaper]:
        return self._store.get_many(list(ids))

    def count(self) -> int:
        return self._store.count()

    def by_key(self, key: str) -> StoredPaper | None:
        """The paper imported under ``key`` (its own key or a source's)."""
        return self._store.find(key=key) if key else None

    def by_keys(self, keys: Iterable[str]) -> dict[str, StoredPaper]:
        """Papers for many cite keys at once (a draft's citations), missing keys left out."""
        return self._store.find_keys(keys)

    def for_entry(self, key: str, doi: str = "", arxiv: str = "", norm_title: str = "") -> StoredPaper | None:
        """The stored paper a cited key stands for: by the entry's identifiers, else by the key."""
        if doi and (p := self._store.find(doi=doi)):
            return p
        if arxiv and (p := self._store.find(arxiv=arxiv)):
            return p
        if norm_title and (p := self._store.find(title=norm_title)):
            return p
        return self.by_key(key)

    def cited_by(self, ids: list[int]) -> dict[int, list[int]]:
        """For each of ``ids``, the stored papers it cites (the citation graph)."""
        return self._store.cited_by(ids)

    @property
    def generation(self) -> int:
        """The store's change counter: what a cached summary of it is valid for."""
        return self._store.generation

    def sources(self) -> list[SourceSummary]:
        """What each kind of source gave the store: papers, abstracts, edges, citing sentences
        (a pass over the store's tables: seconds on a million papers, so callers cache it)."""
        return summarize_sources(self._store, "kind")
