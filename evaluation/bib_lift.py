"""How much a paper of the draft's ``.bib`` should rise: the lift rules of ``models/bib_lift.py``
scored over the lists the real pipeline ranked (``citewise eval ... --bib-lift LISTS.json``).

Why over recorded lists: the ranking is the expensive part and no rule changes it, so each query's
list is ranked once (by ``citewise eval``'s own loop, any protocol) and every rule is scored on it,
now or later (``python -m citewise.evaluation.bib_lift LISTS.json``).

A rule acts on what the editor shows, the first :data:`SHOWN` papers (``settings.k``); the rest
keep their places. The draft's ``.bib`` is a citing paper's references that the store holds, read
three ways, each query in its paper's order:

- **whole .bib**: the finished draft's ``.bib``; the sentence's own papers are in it.
- **growing .bib**: the papers cited by the sentences before this one (a draft written in order:
  a paper accepted for one sentence is in the ``.bib`` at every later one).
- **.bib without the sentence's papers**: every ``.bib`` paper is beside the point here, so a lift
  can only do harm; this row shows how much.

and, for the whole ``.bib`` and the one without the sentence's papers, again with the entries the
paper's earlier sentences cite left unlifted: what the editor does (a ``.bib`` entry the draft
cites elsewhere is not raised, ``server/completion/slot.waiting_in_bib``). Under that exception the
growing ``.bib`` lifts nothing: its rows are what lifting the draft's citations would do.

Metrics: R@1, R@5, R@10 and MRR over the recorded top :data:`LIST_DEPTH`, and the harm, **bib@1
wrong**: the fraction of queries whose first paper is in the ``.bib`` but not one the sentence cites.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from citewise.evaluation.protocol import EvalQuery, query_metrics, read_citing_paper
from citewise.models.bib_lift import ADOPTED, FUSION, NONE, PLACES, WINDOW, LiftRule, lift

LIST_DEPTH = 100
SHOWN = 20  # settings.k: the papers a completion menu or a placeholder's actions rank
KEYS = ("R@1", "R@5", "R@10", "MRR", "bib@1 wrong")
CANDIDATES: tuple[LiftRule, ...] = (
    LiftRule(NONE),
    LiftRule(WINDOW, 30),  # the completion menu's rule before this module
    LiftRule(WINDOW, 10),
    LiftRule(WINDOW, 5),
    LiftRule(WINDOW, 3),
    LiftRule(WINDOW, 2),
    LiftRule(PLACES, 1),
    LiftRule(PLACES, 2),
    LiftRule(PLACES, 3),
    LiftRule(PLACES, 5),
    LiftRule(FUSION, k=60, weight=0.0003),
    LiftRule(FUSION, k=60, weight=0.001),
    LiftRule(FUSION, k=60, weight=0.002),
    LiftRule(FUSION, k=60, weight=0.005),
)
WHOLE = "whole .bib"
WHOLE_UNCITED = "whole .bib, its entries cited so far not lifted"
GROWING = "growing .bib"
OTHERS = ".bib without the sentence's papers"
OTHERS_UNCITED = ".bib without the sentence's papers, its entries cited so far not lifted"
VARIANTS = (WHOLE, WHOLE_UNCITED, GROWING, OTHERS, OTHERS_UNCITED)


@dataclass
class RankedQuery:
    """One query's recorded list (paper ids of the protocol: DOIs, Anthology ids), best first."""

    qid: str
    citing: str
    ranked: list[str]
    relevant: list[str]


@dataclass
class LiftLists:
    """One protocol's recorded queries, in the order they were ranked (each paper's in its
    sentences' order), and each citing paper's draft ``.bib``."""

    queries: list[RankedQuery]
    bibs: dict[str, list[str]] = field(default_factory=dict)


class Recorder:
    """Keeps the top :data:`LIST_DEPTH` of every list a ranking function returns, per protocol."""

    def __init__(self) -> None:
        self.lists: dict[str, list[RankedQuery]] = {}

    def wrap(
        self, rank: Callable[[EvalQuery], Sequence[str]], protocol: str
    ) -> Callable[[EvalQuery], Sequence[str]]:
        def recorded(q: EvalQuery) -> Sequence[str]:
            ranked = list(rank(q))
            self.lists.setdefault(protocol, []).append(
                RankedQuery(q.qid, q.citing_doi, ranked[:LIST_DEPTH], sorted(q.relevant))
            )
            return ranked

        return recorded

    def with_bibs(self, bibs: dict[str, Iterable[str]]) -> dict[str, LiftLists]:
        return {
            p: LiftLists(qs, {c: sorted(bibs.get(c, ())) for c in {q.citing for q in qs}})
            for p, qs in self.lists.items()
        }


def acmcr_bibs(papers_dir: str | Path, collection: set[str]) -> dict[str, set[str]]:
    """Each ACM-CR citing paper's ``.bib``: every reference it lists that the collection holds
    (what a finished draft's ``.bib`` holds, cited in a query sentence or not)."""
    out = {}
    for path in sorted(Path(papers_dir).rglob("*.xml")):
        paper = read_citing_paper(path)
        out[paper.doi] = {d for d in paper.refs.values() if d in collection}
    return out


def bibs_of_queries(queries: Iterable[EvalQuery]) -> dict[str, set[str]]:
    """Each citing paper's ``.bib`` as its queries know it: the papers any of its sentences cites
    (the ACL dev split labels no more than that)."""
    out: dict[str, set[str]] = {}
    for q in queries:
        out.setdefault(q.citing_doi, set()).update(q.relevant)
    return out


def variant_bibs(lists: LiftLists, variant: str) -> list[set[str]]:
    """The ``.bib`` papers a rule may lift at each query of ``lists`` under ``variant``
    (:data:`VARIANTS`; "cited so far": by the paper's sentences before this one)."""
    out: list[set[str]] = []
    before: dict[str, set[str]] = {}
    for q in lists.queries:
        whole = set(lists.bibs.get(q.citing, ()))
        cited = before.setdefault(q.citing, set())
        lifted = {
            WHOLE: whole,
            WHOLE_UNCITED: whole - cited,
            GROWING: set(cited),
            OTHERS: whole - set(q.relevant),
            OTHERS_UNCITED: whole - set(q.relevant) - cited,
        }[variant]
        out.append(lifted)
        cited.update(q.relevant)
    return out


def apply_rule(ranked: Sequence[str], bib: set[str], rule: LiftRule, shown: int = SHOWN) -> list[str]:
    """``ranked`` with its first ``shown`` ordered by ``rule`` (what the editor shows), the rest kept."""
    return lift(ranked[:shown], bib.__contains__, rule) + list(ranked[shown:])


def score(lists: LiftLists, variant: str, rule: LiftRule, shown: int = SHOWN) -> dict[str, dict[str, float]]:
    """Each query's metrics (``KEYS``) under ``rule`` with the ``.bib`` of ``variant``."""
    out = {}
    for q, bib in zip(lists.queries, variant_bibs(lists, variant), strict=True):
        ranked = apply_rule(q.ranked, bib, rule, shown)
        relevant = set(q.relevant)
        m = query_metrics(ranked, relevant, (1, 5, 10))
        m["bib@1 wrong"] = float(bool(ranked) and ranked[0] in bib and ranked[0] not in relevant)
        out[q.qid] = m
    return out


def mean(per_query: dict[str, dict[str, float]], key: str) -> float:
    return sum(m[key] for m in per_query.values()) / len(per_query) if per_query else 0.0


def table(lists: LiftLists, variant: str, rules: Sequence[LiftRule] = CANDIDATES, shown: int = SHOWN) -> str:
    """A markdown table: one row a rule, R@1 / R@5 / R@10 / MRR / bib@1 wrong (the adopted rule bold)."""
    lines = ["| rule | " + " | ".join(KEYS) + " |", "|---|" + "---|" * len(KEYS)]
    for rule in rules:
        per_query = score(lists, variant, rule, shown)
        name = f"**{rule.name}** (adopted)" if rule == ADOPTED else rule.name
        lines.append(f"| {name} | " + " | ".join(f"{mean(per_query, k):.3f}" for k in KEYS) + " |")
    return "\n".join(lines)


def paired_line(lists: LiftLists, variant: str, rule: LiftRule, shown: int = SHOWN) -> str:
    """``rule`` against no lift, query by query (paired randomization test): R@1 and MRR."""
    from citewise.evaluation.paired import compare_rows

    base = score(lists, variant, LiftRule(NONE), shown)
    results = compare_rows(base, score(lists, variant, rule, shown), ["R@1", "MRR"], 10000, 0)
    return "; ".join(f"{r.metric} {r.diff:+.3f} (p {r.p_value:.3f})" for r in results)


def report(all_lists: dict[str, LiftLists], shown: int = SHOWN) -> str:
    """Every protocol's tables, one per ``.bib`` variant, with the adopted rule tested against none."""
    parts = []
    for protocol, lists in all_lists.items():
        sizes = sorted(len(b) for b in lists.bibs.values()) or [0]
        parts.append(
            f"## {protocol}: {len(lists.queries)} queries of {len(lists.bibs)} citing papers, "
            f".bib of {sizes[0]}-{sizes[-1]} papers (median {sizes[len(sizes) // 2]}), "
            f"rules on the first {shown}"
        )
        for variant in VARIANTS:
            parts += [f"\n### {variant}\n", table(lists, variant, shown=shown)]
            parts.append(f"\n{ADOPTED.name} against none: {paired_line(lists, variant, ADOPTED, shown)}")
        parts.append("")
    return "\n".join(parts)


def save(path: str | Path, all_lists: dict[str, LiftLists]) -> None:
    Path(path).write_text(json.dumps({p: asdict(v) for p, v in all_lists.items()}) + "\n", encoding="utf-8")


def load(path: str | Path) -> dict[str, LiftLists]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {
        p: LiftLists([RankedQuery(**q) for q in v["queries"]], {c: list(b) for c, b in v["bibs"].items()})
        for p, v in data.items()
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m citewise.evaluation.bib_lift LISTS.json...``: the tables again, from recorded lists."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("lists", nargs="+", help="files written by `citewise eval ... --bib-lift FILE`")
    p.add_argument("--shown", type=int, default=SHOWN, help=f"papers a rule reorders (default {SHOWN})")
    args = p.parse_args(argv)
    for path in args.lists:
        print(f"# {path}\n")
        print(report(load(path), args.shown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
