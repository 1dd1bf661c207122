"""The .bib lift measurement (evaluation/bib_lift.py) on hand-made lists: the three .bib variants,
the harm count, the rules acting on the shown head only, and the lists' round trip through JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from citewise.evaluation import bib_lift as bl
from citewise.evaluation.protocol import EvalQuery
from citewise.models.bib_lift import NONE, PLACES, WINDOW, LiftRule
from citewise.models.query import ContextQuery

from ..conftest import ACM_BLACKLIST
from .test_library_protocol import acm_small  # noqa: F401  (the fixture)


def lists() -> bl.LiftLists:
    """One paper, two sentences: s1 cites A (ranked 3rd), s2 cites B (ranked 1st) while A is 2nd."""
    return bl.LiftLists(
        [
            bl.RankedQuery("p#1", "p", ["x", "y", "A", "B"], ["A"]),
            bl.RankedQuery("p#2", "p", ["B", "A", "x", "y"], ["B"]),
        ],
        {"p": ["A", "B", "C"]},
    )


def test_variants_whole_growing_and_without_the_sentences_papers() -> None:
    ls = lists()
    whole, uncited, growing, others, others_uncited = (bl.variant_bibs(ls, v) for v in bl.VARIANTS)
    assert whole == [{"A", "B", "C"}, {"A", "B", "C"}]
    assert uncited == [{"A", "B", "C"}, {"B", "C"}]  # A, cited by the first sentence, is not lifted
    assert growing == [set(), {"A"}]  # A was accepted for the first sentence
    assert others == [{"B", "C"}, {"A", "C"}]
    assert others_uncited == [{"B", "C"}, {"C"}]


def test_scores_and_harm() -> None:
    ls = lists()
    none = bl.score(ls, bl.WHOLE, LiftRule(NONE))
    assert none["p#1"]["R@1"] == 0.0 and none["p#1"]["MRR"] == 1 / 3 and none["p#2"]["R@1"] == 1.0
    window = bl.score(ls, bl.WHOLE, LiftRule(WINDOW, 30))
    assert window["p#1"]["R@1"] == 1.0  # A lifted over x and y
    # Without the sentence's own papers, the window puts the other sentence's paper first: harm.
    harm = bl.score(ls, bl.OTHERS, LiftRule(WINDOW, 30))
    assert harm["p#1"]["bib@1 wrong"] == 1.0 and harm["p#2"]["bib@1 wrong"] == 1.0
    one = bl.score(ls, bl.OTHERS, LiftRule(PLACES, 1))
    assert one["p#1"]["bib@1 wrong"] == 0.0  # B is 4th: it passes y only
    assert one["p#2"]["bib@1 wrong"] == 1.0  # A is 2nd: one place is enough to lead


def test_a_rule_reorders_the_shown_head_only() -> None:
    assert bl.apply_rule(["x", "y", "A"], {"A"}, LiftRule(WINDOW, 30), shown=2) == ["x", "y", "A"]
    assert bl.apply_rule(["x", "y", "A"], {"A"}, LiftRule(WINDOW, 30), shown=3) == ["A", "x", "y"]


def test_recorder_keeps_the_lists_and_they_round_trip(tmp_path: Path) -> None:
    rec = bl.Recorder()
    rank = rec.wrap(lambda q: ["A", "x"], "sentence")
    q = EvalQuery("p#1", "p", ContextQuery("s"), {"A"}, "s [1]")
    assert list(rank(q)) == ["A", "x"]
    got = rec.with_bibs({"p": {"A", "C"}})
    assert got["sentence"].bibs == {"p": ["A", "C"]} and got["sentence"].queries[0].relevant == ["A"]
    bl.save(tmp_path / "l.json", got)
    assert bl.load(tmp_path / "l.json") == got
    text = bl.report(got)
    assert "whole .bib" in text and "| none |" in text and "(adopted)" in text
    assert bl.main([str(tmp_path / "l.json")]) == 0


def test_acmcr_bibs_are_the_references_the_collection_holds(tmp_path: Path) -> None:
    (tmp_path / "a.xml").write_text(
        "<doc><doi>10.1/p</doi><title>T</title><abstract>A</abstract><contexts/>"
        "<references><reference id='1'>10.1/A</reference><reference id='2'>10.1/out</reference>"
        "</references></doc>"
    )
    assert bl.acmcr_bibs(tmp_path, {"10.1/a"}) == {"10.1/p": {"10.1/a"}}
    q = EvalQuery("p#1", "p", ContextQuery("s"), {"A"}, "s")
    assert bl.bibs_of_queries([q, EvalQuery("p#2", "p", ContextQuery("t"), {"B"}, "t")]) == {"p": {"A", "B"}}


@pytest.mark.parametrize("protocol", ["sentence", "library"])
def test_eval_bib_lift_end_to_end(acm_small, tmp_path: Path, capsys, protocol: str) -> None:  # noqa: F811
    """``citewise eval acm-cr --bib-lift FILE``: the rules' tables after the run's own row, and the
    lists in FILE, each query's .bib being its paper's references in the store."""
    from citewise.cli import main

    root, store, coll, _queries = acm_small
    lists_file = tmp_path / "lists.json"
    args = ["eval", "acm-cr", "--protocol", protocol, "--library-size", "50", "--limit", "5", "-q"]
    args += ["--papers", str(root / "dev"), "--collection", str(root / "acm-dl"), "--prefetch", "bm25"]
    args += ["--blacklist", str(ACM_BLACKLIST), "--store", str(store.path), "--bib-lift", str(lists_file)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert f"## {protocol}: 5 queries of 1 citing papers" in printed and "| window 30 |" in printed
    (lists,) = bl.load(lists_file).values()
    (bib,) = lists.bibs.values()
    assert len(lists.queries) == 5 and bib and set(bib) <= coll.dois
    assert all(set(q.relevant) <= set(bib) and len(q.ranked) <= bl.LIST_DEPTH for q in lists.queries)
