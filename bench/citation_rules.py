"""Each citation-knowledge rule switched on its own, through ``citewise eval``: the figures that
decide which rules the default keeps (docs/evaluation.md, "Citation knowledge on the honest split").

A variant patches one rule of the shipped pipeline in this process and then runs the very
command line a user would (``citewise eval ... --json FILE``), so ``citewise eval compare
default.json VARIANT.json`` tests it query by query. Variants:

- ``default``: the shipped pipeline;
- ``no-cited-as``: no ``cited-as`` list (the store is ranked as before it had one: BM25 + prior);
- ``cited-as-w1``: the list at RRF weight 1 instead of the bi-encoder's 2;
- ``cited-as-everywhere``: the list speaks for every query (no neighbourhood rule);
- ``no-prior``: the citation-count prior off;
- ``stage-cross``: the cross-encoder second for every query; ``stage-teacher``: the teacher's
  re-scoring for every query (the default picks one a query by the lists its prefetch fused).

    python bench/citation_rules.py no-prior -- acl-citances --store S --citances C --collection X \\
        --json /tmp/no-prior.json
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from citewise import cli
from citewise.models import citing_vectors, recommender
from citewise.models.recommender import Recommender


def _no_cited_as() -> None:
    Recommender._load_citing = lambda self: None


def _cited_as_w1() -> None:
    recommender.fuse_weight = lambda encoder: 1.0


def _everywhere() -> None:
    citing_vectors.CitingVectors.speaks_for = lambda self, neighbours, store_size: True


def _no_prior() -> None:
    shipped = Recommender.prefetch_settings

    def settings(self, fast: bool = False):
        out = shipped(self, fast)
        out.prior_weight = 0.0
        return out

    Recommender.prefetch_settings = settings


def _stage(mode: str) -> Callable[[], None]:
    def patch() -> None:
        Recommender.stage_for = lambda self, candidates: self.stage_for_mode(mode)

    return patch


VARIANTS: dict[str, Callable[[], None]] = {
    "default": lambda: None,
    "no-cited-as": _no_cited_as,
    "cited-as-w1": _cited_as_w1,
    "cited-as-everywhere": _everywhere,
    "no-prior": _no_prior,
    "stage-cross": _stage("bm25"),
    "stage-teacher": _stage("hybrid"),
}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in VARIANTS or argv[1] != "--":
        print(f"usage: citation_rules.py {{{','.join(VARIANTS)}}} -- EVAL ARGS...", file=sys.stderr)
        return 2
    VARIANTS[argv[0]]()
    return cli.main(["eval", *argv[2:]])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
