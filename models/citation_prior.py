"""The citation-count prior: among the papers a query found, the more-cited ones move up a little.

Why: a citing sentence names what it uses ("we report BLEU scores"), and the paper it cites is
more often than not one that many others cite for the same thing. The prior is one more
reciprocal-rank list fused with the query's own lists: the fused candidates ordered by how many
papers of the store cite them (by count, which is the order of any log-count prior), at
``weight`` (a fraction of one list's vote, so it reorders near-ties and never outvotes the text).
Only candidates the query found take part: a popular paper that matches nothing is not added.
The counts come with the BM25 index (``BM25Index.citing_counts``, ``indexer/citations.py``).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence

import numpy as np

from citewise.indexer import bm25_files
from citewise.indexer.store import Store

from .query import Candidate

SOURCE = "citations"
# Shrinks the vote of papers with few citations: one citation is barely evidence of popularity
# (in a small store a paper cited once would otherwise get the full vote and could pass the
# paper the sentence quotes), fifty are. n / (n + PSEUDO_COUNT): 1 -> 0.17, 5 -> 0.5, 50 -> 0.91.
PSEUDO_COUNT = 5.0


def reach_depth(k: int, weight: float, prior_weight: float, rrf_k: float = 60.0) -> int | None:
    """How deep one ranked list (RRF ``weight``) must be for its top ``k`` after the prior: the
    deepest rank whose score plus the largest vote the prior can give (``prior_weight / (rrf_k +
    1)``) still beats the k-th paper's score. None when no depth bounds it (the prior can lift any
    paper past the k-th).

    Why: the keystroke path fuses one BM25 view with the prior, and asked for 1,000 papers to
    show 20. With the default weights a paper below rank 172 cannot reach the top 20 whatever its
    count, so the view is ranked that deep (issue 28). The prior then orders by count among those
    papers, not among 1,000: the one difference from the full path's prior, which only a paper's
    vote size (never whether it can pass the k-th) depends on. It measured better: the first
    answer's R@10 / MRR on the ACL dev split 0.678 / 0.346 against 0.654 / 0.329 at 1,000."""
    if prior_weight <= 0:
        return k
    gap = weight / (rrf_k + k) - prior_weight / (rrf_k + 1)
    if gap <= 0:
        return None
    return max(k, math.ceil(weight / gap - rrf_k))


def with_citation_prior(
    fused: list[Candidate],
    counts_of: Callable[[list[int]], Sequence[int] | np.ndarray],
    weight: float,
    k: float = 60.0,
) -> list[Candidate]:
    """``fused`` (best first) re-sorted after adding ``weight / (k + rank)`` to each cited paper,
    rank being its place by citation count (ties: the fused order). Unchanged when nothing is cited.
    ``counts_of`` gives the counts of a list of paper ids (``BM25Index.citing_count``)."""
    if weight <= 0:
        return fused
    ids = [c.paper_id for c in fused]
    counts = dict(zip(ids, (int(n) for n in counts_of(ids)), strict=True))
    cited = sorted((c for c in fused if counts[c.paper_id] > 0), key=lambda c: -counts[c.paper_id])
    if not cited:
        return fused
    for rank, cand in enumerate(cited, start=1):
        n = counts[cand.paper_id]
        cand.score += weight / (k + rank) * n / (n + PSEUDO_COUNT)
        cand.sources[SOURCE] = float(counts[cand.paper_id])
        cand.ranks[SOURCE] = rank
    return sorted(fused, key=lambda c: -c.score)


# Where at least this share of a store's papers is cited by a paper of the store (citing sentences
# or titles in their BM25 expansion field), the store counts as knowing how papers are cited. The
# ACL dev store (Anthology + its citation files) has 20%; a store of .bib files and abstracts, 0.
CITED_SHARE = 0.01
# Above this many cited papers the ``cited-as`` list (models/citing_vectors.py) is not built: its
# vectors are searched exhaustively and held in memory (1.5 KB a paper: 375 MB here), and embedding
# their citing texts would take the better part of an hour on a laptop. BM25 still reads those
# texts. (An ANN index over them is the way past it; not needed by any store measured.)
MAX_CITED_AS = 250_000


def counts_know_citations(counts: np.ndarray | None) -> bool:
    """Whether these citation counts (one a paper) say the store knows how papers are cited."""
    return counts is not None and len(counts) > 0 and float((np.asarray(counts) > 0).mean()) >= CITED_SHARE


def store_knows_citations(store: Store) -> bool:
    """:func:`counts_know_citations` of the store's saved BM25 index, read without loading it: for
    decisions taken before a ranking loads the index (what ``citewise index`` embeds, what
    ``citewise info`` reports)."""
    return counts_know_citations(bm25_files.saved_citing_counts(store))


def store_outgrows_cited_as(store: Store) -> bool:
    """Whether the store knows how its papers are cited (:func:`counts_know_citations` of its saved
    BM25 index) but cites more than :data:`MAX_CITED_AS` of them, so ``citewise index`` builds it no
    ``cited-as`` list: the one kind of store ranked by BM25 over the citing texts alone, whose
    papers are not embedded (``dense_index.ranking_uses_embeddings``). Elsewhere the dense paper
    list is read: on a store with its ``cited-as`` list, for the sentences that list steps aside for."""
    counts = bm25_files.saved_citing_counts(store)
    return counts_know_citations(counts) and int((np.asarray(counts) > 0).sum()) > MAX_CITED_AS


def knows_citations(bm25: object) -> bool:
    """Whether the BM25 index carries citation knowledge for a noticeable share of its papers."""
    return _counted(bm25)[1]


def cites_any(bm25: object) -> bool:
    """Whether any paper of the index is cited (the prior then applies): asked on every keystroke."""
    return _counted(bm25)[0]


def _counted(bm25: object) -> tuple[bool, bool]:
    """(any paper cited, :func:`counts_know_citations`), counted once per loaded index: a pass
    over ten million counts costs 2-10 ms, asked on every keystroke and every full ranking. A
    reloaded index (or one with a delta) is a new object and is counted again."""
    if bm25 is None:
        return False, False
    try:
        return _CITES_KNOWN[bm25]
    except (KeyError, TypeError):
        pass
    counts = getattr(bm25, "citing_counts", None)
    found = (counts is not None and bool(np.asarray(counts).any()), counts_know_citations(counts))
    try:
        _CITES_KNOWN[bm25] = found
    except TypeError:  # an index that cannot be weakly referenced is counted each time
        pass
    return found


_CITES_KNOWN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
