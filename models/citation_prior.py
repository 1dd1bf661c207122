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

from collections.abc import Callable, Sequence

from .query import Candidate

SOURCE = "citations"
# Shrinks the vote of papers with few citations: one citation is barely evidence of popularity
# (in a small store a paper cited once would otherwise get the full vote and could pass the
# paper the sentence quotes), fifty are. n / (n + PSEUDO_COUNT): 1 -> 0.17, 5 -> 0.5, 50 -> 0.91.
PSEUDO_COUNT = 5.0


def with_citation_prior(
    fused: list[Candidate], counts_of: Callable[[list[int]], Sequence[int]], weight: float, k: float = 60.0
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
