"""Dense prefetch candidates fused with the BM25 prefetch, measured offline.

Inputs: a dev dump of ``reranker_eval score --with-texts --depth 200`` (the default prefetch's top
200 per query) and a dense list file (``{"qid", "dense": [ids]}`` per line, e.g. from
``biencoder retrieve``). Used by ``bench/eval_dense_fusion.py`` and by the static-encoder training's
report, so both measure fusion one way.
"""

from __future__ import annotations

from citewise.models.prefetch import rrf

from . import protocol as ev
from .citances import read_jsonl


def fusion_metrics(dump: str, dense: str, weights: tuple[float, ...] = (0.25, 0.5, 1.0)) -> dict:
    """Metrics of the dump's prefetch, the dense list alone, and their fusion at each dense weight,
    fused with the same ``rrf`` the product's prefetch uses (so an offline figure is the product's)."""
    rows = {r["qid"]: r for r in read_jsonl(dump)}
    lists = {r["qid"]: r["dense"] for r in read_jsonl(dense) if "qid" in r}
    out: dict[str, dict] = {}

    def run(name: str, ranked_of) -> None:
        per = [ev.query_metrics(ranked_of(q), set(r["relevant"])) for q, r in rows.items()]
        out[name] = {k: round(v, 4) for k, v in ev.aggregate(per).items()}

    def own_removed(q: str) -> list[str]:
        citing = q.split("#")[0]  # an ACL query's own paper is not a candidate (ACM: blacklisted)
        return [x for x in lists[q] if x != citing]

    run("prefetch", lambda q: rows[q]["ids"])
    run("dense", own_removed)
    for w in weights:

        def fused(q: str, w: float = w) -> list[str]:
            # rrf fuses store ids (ints); the dump's ids are DOIs or Anthology ids, so each is
            # numbered in order of first appearance and the fused list is mapped back.
            number: dict[str, int] = {}
            lists_q = {
                "bm25": [(number.setdefault(x, len(number)), 1.0) for x in rows[q]["ids"]],
                "dense": [(number.setdefault(x, len(number)), 1.0) for x in own_removed(q)],
            }
            names = list(number)
            return [names[c.paper_id] for c in rrf(lists_q, weights={"bm25": 1.0, "dense": w})][:200]

        run(f"rrf dense w={w:g}", fused)
    return out
