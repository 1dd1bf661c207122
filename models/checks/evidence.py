"""The stored records a ``.bib`` entry is compared with, read from the paper store.

Why not every stored row: the language server imports the draft's own ``.bib`` files into the
store, so the entry being checked is in the store itself, and a made-up entry would "match"
its own row. A row counts as evidence only when a source other than the draft's ``.bib`` files
holds the paper (``paper_sources``). Where the draft's ``.bib`` was imported first and owns the
row, the other source only filled gaps, and a disagreement can go unseen: a missed finding, never
a false one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from citewise.indexer.bm25 import fts_or_query
from citewise.indexer.records import normalize_title
from citewise.indexer.store import Store, StoredPaper

_FTS_CANDIDATES = 5
# Rows of one title to compare (the ACL Anthology stores "Briefly Noted" 54 times: every one
# must be seen for the entry's own year to be found among them).
TITLE_ROWS = 500


class StoreEvidence:
    """:class:`~.entries.Evidence` over a store, ignoring what only ``own_sources`` hold."""

    def __init__(self, store: Store, own_sources: Iterable[str] = ()) -> None:
        self.store = store
        self.own = {os.path.abspath(s) for s in own_sources if s}

    def _independent(self, papers: list[StoredPaper]) -> list[StoredPaper]:
        if not self.own or not papers:
            return papers
        held = self.store.sources_of([p.id for p in papers])
        return [p for p in papers if {os.path.abspath(s) for s in held.get(p.id, {p.source}) if s} - self.own]

    def by_doi(self, doi: str) -> list[StoredPaper]:
        return self._independent(self.store.find_all(doi=doi, limit=5)) if doi else []

    def by_arxiv(self, arxiv: str) -> list[StoredPaper]:
        return self._independent(self.store.find_all(arxiv=arxiv, limit=5)) if arxiv else []

    def by_title(self, title: str) -> list[StoredPaper]:
        """Papers with the same normalised title, else the full-text index's closest titles."""
        if len(normalize_title(title)) < 8:
            return []
        exact = self._independent(self.store.find_all(title=title, limit=TITLE_ROWS))
        if exact:
            return exact
        match = fts_or_query(title, max_terms=24)
        if not match:
            return []
        hits = self.store.fts_search(match, _FTS_CANDIDATES, weights=(1.0, 0.0, 0.0))
        papers = self.store.get_many([pid for pid, _s in hits])
        return self._independent([papers[pid] for pid, _s in hits if pid in papers])
