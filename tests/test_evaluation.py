"""Evaluation protocol and metrics on hand-made inputs (the real run is in test_real_acm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from citewise.models import evaluation as ev


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Explanations help [13, 14], yet fail [3-5].", "Explanations help, yet fail."),
        ("As shown [3–5] before.", "As shown before."),
        ("BM25 is strong (Robertson et al., 2009; Lin 2019a) here.", "BM25 is strong here."),
        ("No markers (see below) here.", "No markers (see below) here."),
        ("Trailing marker [7]", "Trailing marker"),
    ],
)
def test_strip_citation_markers(sentence: str, expected: str) -> None:
    assert ev.strip_citation_markers(sentence) == expected


def test_query_metrics() -> None:
    m = ev.query_metrics(["a", "x", "b"] + ["y"] * 300 + ["c"], {"a", "b", "c", "d"})
    assert m["R@10"] == 0.5 and m["R@1000"] == 0.75 and m["MRR"] == 1.0
    ideal = 1 + 1 / 1.584962500721156 + 0.5 + 1 / 2.321928094887362
    assert m["nDCG@10"] == pytest.approx((1 + 0.5) / ideal)
    none = ev.query_metrics(["x"] * 5, {"a"})
    assert none == {"R@10": 0, "R@50": 0, "R@100": 0, "R@200": 0, "R@1000": 0, "MRR": 0, "nDCG@10": 0}


XML = """<doc><doi>10.1145/Q.1</doi><title>Citing title</title><abstract>Citing abstract.</abstract>
<contexts><context id="01" section="intro">
<s>No citation here.</s>
<s cites="1,2">Ranking helps [1, 2] a lot.</s>
<s cites="3">Only outside the collection [3].</s>
</context></contexts>
<references><reference id="1">10.1145/A.1</reference><reference id="2"> 10.1145/b.2 </reference>
<reference id="3">https://example.org/x.pdf</reference></references></doc>"""


def test_load_queries_follows_protocol(tmp_path: Path) -> None:
    (tmp_path / "venue").mkdir()
    (tmp_path / "venue" / "q.xml").write_text(XML)
    queries = ev.load_dev_queries(tmp_path, {"10.1145/a.1", "10.1145/b.2"})
    assert len(queries) == 1
    q = queries[0]
    assert q.relevant == {"10.1145/a.1", "10.1145/b.2"}
    assert q.query.local == "Ranking helps a lot."
    assert (q.query.citing_title, q.query.citing_abstract) == ("Citing title", "Citing abstract.")
    result = ev.evaluate(lambda q: ["10.1145/b.2"], queries)
    assert result["queries"] == 1 and result["R@10"] == 0.5 and result["MRR"] == 1.0
    assert list(result) == list(ev.METRIC_KEYS)
