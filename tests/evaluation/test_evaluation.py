"""Evaluation protocol and metrics on hand-made inputs (the real run is in test_real_acm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from citewise.evaluation import protocol as ev


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


def test_acl_dev_queries_follow_the_issue_16_protocol(tmp_path: Path) -> None:
    """Dev split only (citing papers of 2013/2014), markers removed, global context = the citing
    paper's title and abstract, relevant = cited papers in the store, citing paper reported for exclusion."""
    import json

    from citewise.indexer.records import PaperRecord
    from citewise.indexer.store import Store

    rows = [
        {"citing": "P13-1001", "cited": "A00-1031", "text": "We use TnT (Brants, 2000), a tagger."},
        {
            "citing": "P13-1001",
            "cited": "J93-2004",
            "text": "Data from Marcus et al. (1993) and TnT (Brants, 2000).",
        },
        {
            "citing": "P13-1001",
            "cited": "A00-1031",
            "text": "Data from Marcus et al. (1993) and TnT (Brants, 2000).",
        },
        {"citing": "P12-1001", "cited": "A00-1031", "text": "Training year (Brants, 2000) never used."},
        {
            "citing": "W14-0101",
            "cited": "X99-9999",
            "text": "Cites a paper outside the store (Nobody, 1999).",
        },
    ]
    path = tmp_path / "citances.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = Store(tmp_path / "acl.sqlite")
    recs = [
        PaperRecord(title="TnT - A Statistical Part-Of-Speech Tagger", key="A00-1031", acl_id="A00-1031"),
        PaperRecord(title="Building a large annotated corpus of English", key="J93-2004", acl_id="J93-2004"),
        PaperRecord(title="Citing paper", abstract="About tagging.", key="P13-1001", acl_id="P13-1001"),
    ]
    store.import_source("acl.jsonl", iter(recs), fmt="jsonl")
    queries, own = ev.load_acl_dev_queries(path, store)
    assert [q.query.local for q in queries] == ["We use TnT, a tagger.", "Data from and TnT."]
    assert queries[1].relevant == {"A00-1031", "J93-2004"}
    assert (
        queries[0].query.citing_title == "Citing paper"
        and queries[0].query.citing_abstract == "About tagging."
    )
    assert own == {"P13-1001": store.find(key="P13-1001").id}
