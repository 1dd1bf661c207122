"""``citewise eval check`` (issue 27): the fabrications are what they claim, the detection-at-
false-alarm arithmetic on hand-made scores, and one small end-to-end run on real ACM-CR files."""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path

import pytest

from citewise.evaluation import check_eval as ce
from citewise.indexer.records import PaperRecord, normalize_title
from citewise.models.checks.entries import doi_malformed, read_entry

from ..conftest import ACM_BLACKLIST, ACM_DEV, ACM_DL, require

PAPER = PaperRecord(
    title="Neural Ranking Models for Conversational Question Answering over Knowledge Graphs",
    authors=["Smith, Jane", "Doe, John"],
    year=2019,
    venue="Proceedings of SIGIR",
    entry_type="inproceedings",
    doi="10.1145/3331184.3331234",
)
OTHERS = [
    PaperRecord(
        title="Efficient Inverted Index Compression with Learned Codecs", authors=["Ng, Ann"], doi="10.1/x"
    ),
    PaperRecord(
        title="Eye Tracking Studies of Search Engine Result Pages", authors=["Kim, Lee"], doi="10.2/y"
    ),
    PaperRecord(title="Crowdsourcing Relevance Judgments at Scale", authors=["Smith, Bob"], doi="10.3/z"),
]


def _others(seed: int = 0):
    rng = random.Random(seed)
    return lambda: rng.choice(OTHERS)


def test_malformed_dois_are_malformed_and_the_real_one_is_not() -> None:
    assert not doi_malformed(PAPER.doi)
    for how in ce.DOI_CORRUPTIONS:
        bad = ce.corrupt_doi(PAPER.doi, how)
        assert bad != PAPER.doi and doi_malformed(bad), (how, bad)
    with pytest.raises(ValueError):
        ce.corrupt_doi(PAPER.doi, "nonsense")


def test_changed_titles_replace_a_third_of_the_content_words_at_least_two() -> None:
    rng = random.Random(3)
    for seed in range(20):
        rng.seed(seed)
        new = ce.change_title(PAPER.title, [o.title for o in OTHERS], rng)
        assert new is not None and normalize_title(new) != normalize_title(PAPER.title)
        old_words = [m.group() for m in ce.content_words(PAPER.title)]
        new_words = [m.group() for m in ce.content_words(new)]
        assert len(new_words) == len(old_words)
        changed = sum(a != b for a, b in zip(old_words, new_words, strict=True))
        assert changed == max(2, round(len(old_words) / 3))
    assert ce.change_title("Graphs", ["Other Words Here"], rng) is None  # one content word


def test_years_move_by_one_to_five_and_authors_are_disjoint() -> None:
    rng = random.Random(0)
    deltas = {ce.shift_year(2000, rng)[1] for _ in range(400)}
    assert deltas == {-5, -4, -3, -2, -1, 1, 2, 3, 4, 5}
    assert all(ce.shift_year(2000, rng)[0] - 2000 in deltas for _ in range(20))
    fab = ce.Fabricator(random.Random(1), _others())
    made = fab.make(PAPER, 7, "authors")
    facts = read_entry(made.text)
    assert ce.disjoint_authors(facts.record.authors, PAPER.authors)  # "Smith, Bob" is never chosen


def test_fabricated_entries_parse_and_carry_their_change() -> None:
    fabricated, tried = ce.fabricate_all({7: PAPER}, _others(), seed=0)
    kinds = {f.kind for f in fabricated}
    assert {"title", "authors", "doi-other", "doi-malformed"} <= kinds
    assert tried["title"] == 1 and tried["title (no DOI)"] == 1
    for fab in fabricated:
        facts = read_entry(fab.text)
        assert facts is not None and facts.key == "fab7", fab
        rec = facts.record
        if fab.kind.startswith("year"):
            gap = abs(rec.year - PAPER.year)
            assert (gap == 1) == fab.kind.startswith("year±1") and 1 <= gap <= 5
        if fab.kind == "doi-other":
            assert rec.doi in {o.doi for o in OTHERS}
        if fab.kind == "doi-malformed":
            assert doi_malformed(facts.raw_doi)
        if fab.kind.endswith(ce.NO_DOI):
            assert rec.doi == "" and "doi" not in fab.text.lower()
        if fab.kind.startswith("title"):
            assert normalize_title(rec.title) != normalize_title(PAPER.title)


def _trials(true, **swaps) -> list[ce.Trial]:
    out = [ce.Trial("q", "true", i, r) for i, r in enumerate(true)]
    for kind, ratios in swaps.items():
        out += [ce.Trial("q", kind, i, r) for i, r in enumerate(ratios)]
    return out


def test_detection_at_false_alarm_rates_on_hand_made_scores() -> None:
    true = [0.05, 0.1, 0.2, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, None]  # ten true citations, one not judged
    random_ = [0.0, 0.01, 0.08, 0.12, 0.25, None]
    venue = [0.5, 0.9]
    bm25 = [1.0, 1.0]
    # 10%: one of ten may be flagged -> flag below the 2nd smallest judged score (0.1)
    assert ce.threshold_at(true, 0.10) == 0.1
    assert ce.threshold_at(true, 0.05) == 0.05  # none may be flagged
    assert ce.threshold_at(true, 0.95) == math.inf  # all nine judged may be
    s = ce.summarise_trials(_trials(true, random=random_, venue=venue, bm25=bm25), rates=(0.05, 0.1, 0.2))
    assert s["trials"] == {"true": 10, "random": 6, "venue": 2, "bm25": 2}
    assert s["not_judged"]["true"] == 1 and s["not_judged"]["random"] == 1
    at = {p["rate"]: p for p in s["at_rates"]}
    assert at[0.05]["false_alarms"] == 0.0 and at[0.05]["detection"]["random"] == round(2 / 6, 4)
    assert at[0.1]["false_alarms"] == 0.1 and at[0.1]["detection"]["random"] == 0.5
    assert at[0.2]["threshold"] == 0.2 and at[0.2]["detection"]["random"] == round(4 / 6, 4)
    assert s["at_shipped_threshold"]["false_alarms"] == 0.2  # 0.05 and 0.1 are below 0.15
    curve = s["curve"]
    assert curve[0]["rate"] == 0.0 and curve[-1]["rate"] == 1.0
    assert curve[-1]["detection"]["random"] == round(5 / 6, 4)  # the unjudged one is never flagged
    fa = [p["false_alarms"] for p in curve]
    assert fa == sorted(fa) and all(p["false_alarms"] <= p["rate"] + 1e-9 for p in curve)


def test_split_bib_keeps_each_entry_as_written() -> None:
    text = "% a comment\n@article{a,\n title = {A},\n doi = {10.1/A}\n}\n\n@book{b,\n title={B}}\n"
    assert ce.split_bib(text) == [
        "@article{a,\n title = {A},\n doi = {10.1/A}\n}\n",
        "@book{b,\n title={B}}\n",
    ]
    assert ce.is_session("@inproceedings{x,\ntitle = {Session Details: Search},\n}")


@pytest.mark.slow
def test_eval_check_end_to_end_on_real_acm_cr_files(tmp_path: Path, capsys) -> None:
    """Two ACM-CR .bib files and one dev paper that cites papers of them."""
    require(ACM_DL)
    require(ACM_DEV)
    from citewise.cli import main

    lib = tmp_path / "acm-dl"
    lib.mkdir()
    for name in ("chiir/chiir-2018.bib", "sigir/sigir-2018.bib"):
        shutil.copy(ACM_DL / name, lib / Path(name).name)
    dev = tmp_path / "dev"
    dev.mkdir()
    shutil.copy(next(ACM_DEV.rglob("3343413.3377968.xml")), dev)
    store = tmp_path / "s.sqlite"
    assert main(["index", "-q", "--store", str(store), str(lib)]) == 0
    out_json, svg = tmp_path / "check.json", tmp_path / "docs" / "checks.svg"
    args = ["eval", "check", "--dataset", "acm-cr", "--store", str(store), "--papers", str(dev)]
    args += ["--collection", str(lib), "--blacklist", str(ACM_BLACKLIST), "--limit", "6", "--sample", "40"]
    assert main([*args, "--json", str(out_json), "--plot", str(svg), "-q"]) == 0
    printed = capsys.readouterr().out
    assert "unlikely-citation" in printed and "suspect-reference" in printed
    r = json.loads(out_json.read_text())
    u = r["unlikely_citation"]
    assert 1 <= r["sentences"] <= 6 and u["trials"]["true"] >= 1
    for p in [u["at_shipped_threshold"], *u["at_rates"], *u["curve"]]:
        assert 0 <= p["false_alarms"] <= 1 and all(0 <= d <= 1 for d in p["detection"].values())
    fab = r["suspect_reference"]
    assert fab["all"]["entries"] >= 5 and fab["authors"]["suspect"] == 1.0
    assert fab["doi-malformed"]["suspect"] == 1.0 and fab["doi-other"]["suspect_of_tied"] == 1.0
    m = r["unmodified"]
    assert m["entries"]["sample"] == 40 and m["entries"]["cited"] >= 1
    assert m["findings"]["suspect-reference"] == 0
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()
    # seeded: the same run gives the same figures
    again = tmp_path / "again.json"
    assert main([*args, "--json", str(again), "-q"]) == 0
    strip = ("seconds", "load_average")
    a, b = (json.loads(p.read_text()) for p in (out_json, again))
    assert {k: v for k, v in a.items() if k not in strip} == {k: v for k, v in b.items() if k not in strip}
