"""The paired comparison of two eval runs (evaluation/paired.py): pure, on figures the tests make."""

from __future__ import annotations

import random

import pytest

from citewise.evaluation import paired


def _runs(n: int, shift: float, noise: float, seed: int = 1) -> tuple[dict[str, float], dict[str, float]]:
    """``n`` queries of varied difficulty; b = a + shift + symmetric noise."""
    rng = random.Random(seed)
    a = {f"q{i}": rng.random() for i in range(n)}
    b = {q: v + shift + rng.uniform(-noise, noise) for q, v in a.items()}
    return a, b


def test_identical_runs_differ_by_nothing() -> None:
    a, _ = _runs(50, 0, 0)
    r = paired.paired_test(a, dict(a), "MRR")
    assert r.diff == 0 and r.p_value == 1.0 and r.ci_low == r.ci_high == 0
    assert r.queries == 50 and r.a_better == r.b_better == 0


def test_a_steady_gain_is_told_from_noise() -> None:
    """A small gain on every query is significant although the queries' own figures vary far more;
    the same gain drowned in noise is not."""
    a, b = _runs(300, 0.02, 0.01)
    r = paired.paired_test(a, b, "R@10")
    assert r.p_value < 0.001 and 0 < r.ci_low < 0.02 < r.ci_high and r.b_better == 300
    a, b = _runs(300, 0.002, 0.3)
    r = paired.paired_test(a, b, "R@10")
    assert r.p_value > 0.05 and r.ci_low < 0 < r.ci_high


def test_swapping_the_runs_negates_the_difference_and_keeps_p() -> None:
    a, b = _runs(120, 0.03, 0.2, seed=7)
    ab, ba = paired.paired_test(a, b), paired.paired_test(b, a)
    assert ab.diff == pytest.approx(-ba.diff) and ab.p_value == ba.p_value
    assert (ab.b_better, ab.a_better) == (ba.a_better, ba.b_better)


def test_seeded_and_paired_over_the_shared_queries_only() -> None:
    a, b = _runs(80, 0.05, 0.1)
    b.pop("q0")
    b["extra"] = 1.0
    r1, r2 = paired.paired_test(a, b, seed=3), paired.paired_test(a, b, seed=3)
    assert r1 == r2 and r1.queries == 79
    with pytest.raises(ValueError, match="share no query"):
        paired.paired_test({"x": 1.0}, {"y": 1.0})


def test_rows_compare_every_metric_and_print_a_table() -> None:
    a = {f"q{i}": {"R@10": i % 2, "MRR": 0.5} for i in range(40)}
    b = {f"q{i}": {"R@10": 1, "MRR": 0.5} for i in range(40)}
    results = paired.compare_rows(a, b, ["R@10", "MRR"], rounds=2000)
    assert [r.metric for r in results] == ["R@10", "MRR"]
    assert results[0].diff == pytest.approx(0.5) and results[0].p_value < 0.001
    assert results[1].diff == 0 and results[1].p_value == 1.0
    table = paired.format_results(results)
    assert "| R@10 | 40 | 0.5000 | 1.0000 | +0.5000 |" in table and "20 / 0" in table
