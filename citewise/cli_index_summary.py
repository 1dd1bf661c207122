"""The words of ``citewise index``'s summary: what the files of an import hold, why records were
skipped, and what the search index step does and why.

Why apart from :mod:`citewise.cli_index`: that module runs the import (its progress, its failure
modes); this one only says what came of it, in the words ``citewise info`` uses
(:mod:`citewise.indexer.store_summary`), so the two commands never give one store two sets of
numbers. Three things users could not tell before: an OpenAlex import said "0 citation edges"
where ``info`` showed 975 (reference lists were not counted), an S2AG citations file said 94
(rows, one per citing sentence) where ``info`` said 77 edges, and "3,653 skipped" said not why.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: `citewise --help` must not load the indexer
    from citewise.indexer.store import Store


def import_counts(store: Store, paths: Iterable[Path]) -> dict[str, int]:
    """What the files of this import hold in the store (papers, abstracts, citation edges, those
    to stored papers and not, citing sentences), counted as ``citewise info`` counts them."""
    from citewise.indexer.store_summary import summarize_total

    return summarize_total(store, only=[str(p) for p in paths]).counts()


def holdings_line(counts: dict[str, int]) -> str:
    """ "held by the 2 files: 49 papers, 46 abstracts, 930 citation edges (...), 0 citing
    sentences": the words of ``citewise info`` (``store_summary.holdings_words``)."""
    from citewise.indexer.store_summary import SourceSummary, holdings_words

    summary = SourceSummary(
        name="import",
        kind="all",
        files=counts["files"],
        papers=counts["papers"],
        abstracts=counts["abstracts"],
        edges=counts["citation_edges"],
        resolved_edges=counts["resolved_citation_edges"],
        sentences=counts["citing_sentences"],
    )
    files = counts["files"]
    held_by = "the file" if files == 1 else f"the {files:,} files"
    return f"held by {held_by}: {holdings_words(summary)}"


def skip_line(skipped: int, reasons: dict[str, int]) -> str:
    """ "3,653 skipped: 3,653 session records (...), not papers": every skip by its reason, most
    first; skips that came without one (none should) are said so rather than left out."""
    parts = [f"{n:,} {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))]
    unexplained = skipped - sum(reasons.values())
    if unexplained > 0:
        parts.append(f"{unexplained:,} for reasons not recorded")
    return f"{skipped:,} skipped: {', '.join(parts)}"


@dataclass(frozen=True)
class SearchIndexState:
    """The saved BM25 index against the store, read from its ``meta.json`` only (cheap: the
    arrays are checked by the load that follows), so ``index`` can say why it rebuilds."""

    state: str  # "missing", "damaged", "outdated", "stale" or "up to date"
    why: str = ""  # what made it so, for the user

    @property
    def current(self) -> bool:
        return self.state == "up to date"

    def words(self) -> str:
        """ "stale (the store changed since it was built)", "up to date"."""
        return f"{self.state} ({self.why})" if self.why else self.state

    def as_dict(self) -> dict[str, str]:
        return {"state": self.state, "why": self.why}


def search_index_state(store: Store) -> SearchIndexState:
    """Whether the saved search index serves the store as it is, and if not, why not."""
    from citewise.indexer import bm25_files

    meta_path = bm25_files.index_folder(store) / "meta.json"
    if not meta_path.exists():
        return SearchIndexState("missing", "none was built for this store yet")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta["version"] != bm25_files.INDEX_VERSION:
            return SearchIndexState("outdated", "built by another version of citewise")
        return _against_store(store, int(meta["generation"]), meta["params"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return SearchIndexState("damaged", f"its meta.json is unreadable: {type(exc).__name__}")


def _against_store(store: Store, generation: int, params: dict) -> SearchIndexState:
    """A saved index of this version: stale when the store or the BM25 settings moved on."""
    from citewise.indexer.bm25 import BM25Params

    if generation != store.generation:
        return SearchIndexState("stale", "the store changed since it was built")
    if BM25Params(**params) != BM25Params():
        return SearchIndexState("stale", "built with other settings")
    return SearchIndexState("up to date")


def announce_search_index(state: SearchIndexState, files: int, rebuild: bool) -> None:
    """Before the search index step of an import that brought nothing new: what it is about to
    do and why, on stderr. Rebuilding a big store's index takes a minute; after "0 imported"
    that minute looked like a hang."""
    nothing = "nothing new to import" if files else "nothing to import (no files named)"
    if state.current:
        doing = "nothing to rebuild"
    elif rebuild:
        doing = "rebuilding it ..." if state.state != "missing" else "building it ..."
    else:
        doing = "not rebuilt (--no-search-index); searches rebuild it on first use"
    print(f"citewise: {nothing}; the search index is {state.words()}: {doing}", file=sys.stderr)


def search_index_line(done: dict) -> str:
    """The summary's line on the search index step (``summary["search_index"]``)."""
    before = SearchIndexState(done["state"], done["why"])
    papers = f"{done['papers']:,} {'paper' if done['papers'] == 1 else 'papers'}"
    if before.current:
        return f"search index: up to date, {papers} (nothing to rebuild)"
    if not done["rebuilt"]:
        return f"search index: {before.words()}, not rebuilt (--no-search-index)"
    if before.state == "missing":
        return f"search index: built, {papers} in {done['seconds']:.1f} s ({before.why})"
    return f"search index: rebuilt, {papers} in {done['seconds']:.1f} s (it was {before.state}: {before.why})"
