"""Two runs of ``citewise eval`` compared query by query: is a difference more than noise?

Why: on 336 ACM-CR or 963 ACL dev queries, differences of a few thousandths in a mean metric
decided nothing, and the means alone cannot tell a real gain from luck. Pairing the two runs'
per-query figures (both ranked the same queries) removes the queries' own difficulty from the
comparison. Two standard tests of IR evaluation (Smucker, Allan and Carterette, CIKM 2007):

- the paired randomization test: under "the two systems are the same", each query's pair of
  figures could have come out either way round, so the observed mean difference is compared with
  the mean differences of many random sign flips (two-sided p-value);
- a percentile bootstrap of the mean difference over queries (its 95% interval).

numpy only (scipy is not a dependency of the installed package); seeded, so a report repeats.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

_CHUNK = 1000


@dataclass(frozen=True)
class PairedResult:
    """One metric of two runs over the queries both ranked."""

    metric: str
    queries: int
    mean_a: float
    mean_b: float
    diff: float  # mean of b - a
    ci_low: float  # 95% percentile bootstrap interval of the mean difference
    ci_high: float
    p_value: float  # two-sided paired randomization test
    b_better: int  # queries where b scored higher
    a_better: int


def paired_test(
    a: Mapping[str, float], b: Mapping[str, float], metric: str = "", rounds: int = 10000, seed: int = 0
) -> PairedResult:
    """Compare ``b`` with ``a`` (query id -> figure) over the query ids both hold.

    Raises ValueError when they share no query (two runs of different query sets)."""
    qids = sorted(a.keys() & b.keys())
    if not qids:
        raise ValueError("the two runs share no query")
    x = np.array([a[q] for q in qids], dtype=np.float64)
    y = np.array([b[q] for q in qids], dtype=np.float64)
    d = y - x
    rng = np.random.default_rng(seed)
    observed = abs(d.mean())
    flipped: list[np.ndarray] = []
    boots: list[np.ndarray] = []  # bootstrap means, one array per chunk
    for start in range(0, rounds, _CHUNK):  # chunks: 10,000 rounds of 963 queries stay ~8 MB at a time
        n = min(_CHUNK, rounds - start)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(n, len(d)))
        flipped.append(np.abs((signs * d).mean(axis=1)))
        boots.append(d[rng.integers(0, len(d), size=(n, len(d)))].mean(axis=1))
    # Counting the observed split itself among the rounds keeps p above zero (Phipson & Smyth 2010).
    p = (1 + int(np.count_nonzero(np.concatenate(flipped) >= observed - 1e-12))) / (rounds + 1)
    boot = np.concatenate(boots)
    low, high = np.percentile(boot, [2.5, 97.5])
    return PairedResult(
        metric,
        len(qids),
        float(x.mean()),
        float(y.mean()),
        float(d.mean()),
        float(low),
        float(high),
        float(p),
        int(np.count_nonzero(d > 0)),
        int(np.count_nonzero(d < 0)),
    )


def compare_rows(
    a: Mapping[str, Mapping[str, float]],
    b: Mapping[str, Mapping[str, float]],
    metrics: list[str],
    rounds: int = 10000,
    seed: int = 0,
) -> list[PairedResult]:
    """Each metric of two rows (query id -> that query's metrics), tested pairwise."""
    return [
        paired_test(
            {q: m[k] for q, m in a.items() if k in m},
            {q: m[k] for q, m in b.items() if k in m},
            k,
            rounds,
            seed,
        )
        for k in metrics
    ]


def format_results(results: list[PairedResult]) -> str:
    """A markdown table: each metric's means, difference, interval, p, and who won how often."""
    lines = [
        "| metric | queries | A | B | B - A | 95% interval | p (randomization) | B better / A better |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.metric} | {r.queries} | {r.mean_a:.4f} | {r.mean_b:.4f} | {r.diff:+.4f} | "
            f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}] | {r.p_value:.4f} | {r.b_better} / {r.a_better} |"
        )
    return "\n".join(lines)
