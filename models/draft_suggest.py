"""Suggestions for a whole draft: its title, abstract and text, fused with the citation graph.

Why a function of its own: it is the recommender's answer to a different question than a
placeholder's ("what should this paper cite at all"), shared by the language server's command
and ``citewise suggest``; it lives with the recommender so the server never queries the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from citewise.indexer.store import StoredPaper

from . import cocitation
from .query import Candidate, ContextQuery
from .recommender import Recommender


@dataclass
class DraftSuggestion:
    """One paper suggested for the whole draft, with why."""

    paper: StoredPaper
    score: float
    reasons: list[str]


def suggest_for_draft(
    recommender: Recommender,
    title: str,
    abstract: str,
    body: str,
    *,
    k: int = 20,
    candidates: int = 200,
    exclude: Iterable[int] = (),
    graph_seeds: int = 10,
    graph_weight: float = 0.5,
    rerank: bool = True,
) -> list[DraftSuggestion]:
    """Papers the draft as a whole should consider citing.

    The query is the title, abstract and text; the prefetch is fused with citation-graph
    navigation (paper 003): the stored papers cited by the top hits join the candidates, scored
    by how many top hits cite them, since what the most relevant papers cite is likely relevant
    too. The second stage reranks when there is one; papers the draft already cites are excluded.
    """
    excluded = set(exclude)
    library = recommender.library
    query = ContextQuery(" ".join(body.split())[:4000], title, abstract)
    cands = recommender.prefetch(query, candidates, excluded=excluded)
    # What the draft cites already (the excluded papers) lifts the papers often cited beside it.
    cands = cocitation.with_cocitation(cands, recommender.store, excluded)
    by_id: dict[int, Candidate] = {c.paper_id: c for c in cands}
    reasons: dict[int, list[str]] = {
        c.paper_id: [f"matches the draft (#{i})"] for i, c in enumerate(cands, 1)
    }
    seeds = [c.paper_id for c in cands[:graph_seeds]]
    cited = library.cited_by(seeds) if seeds else {}
    citers: dict[int, list[int]] = {}
    for citing, targets in cited.items():
        for t in targets:
            if t not in excluded:
                citers.setdefault(t, []).append(citing)
    if citers:
        top_score = cands[0].score if cands else 1.0
        for pid, who in citers.items():
            bonus = graph_weight * top_score * len(who) / max(1, len(seeds))
            cand = by_id.get(pid)
            if cand is None:
                cand = by_id[pid] = Candidate(pid, 0.0)
                reasons[pid] = []
            cand.score += bonus
            cand.sources["graph"] = float(len(who))
            reasons[pid].append(f"cited by {len(who)} of the top {len(seeds)} matches")
    ranked = sorted(by_id.values(), key=lambda c: -c.score)[: max(candidates, k)]
    papers = library.get_many(c.paper_id for c in ranked)
    stage = recommender.stage_for(ranked) if rerank else None
    if stage is not None:
        ranked = recommender.rerank(query, ranked, papers, stage)
    out = []
    for c in ranked:
        if c.paper_id in papers and c.paper_id not in excluded:
            out.append(DraftSuggestion(papers[c.paper_id], c.score, reasons.get(c.paper_id, [])))
        if len(out) >= k:
            break
    return out
