"""The honest split of the ACL dev protocol: its store knows how papers are cited only from papers
written before the dev years, and from no dev paper (``evaluation/honest_split.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from citewise.evaluation.citances import acl_year, is_acl_dev
from citewise.evaluation.honest_split import FIRST_DEV_YEAR, HonestSplit, honest_split, leaks, leaky_keep
from citewise.indexer import citations
from citewise.indexer.citations import CitationEdge
from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store

from ..conftest import ACL_XML, SHARED_DATA, require


def test_the_rule_keeps_only_older_citers_that_are_not_dev_papers() -> None:
    split = HonestSplit(frozenset({"W12-9999"}))  # a dev paper whose id reads as an older year
    kept = {c: split.keep(CitationEdge(c, "A00-1031")) for c in _IDS}
    assert kept == {
        "P12-1001": True,
        "J93-2004": True,
        "P13-1001": False,
        "W14-3301": False,
        "W15-0101": False,  # after the dev years: the earlier rule kept it
        "2020.acl-main.1": False,
        "W12-9999": False,
        "not-an-acl-id": False,  # no year: nothing shows it is older
    }
    assert leaky_keep(CitationEdge("W15-0101", "A00-1031"))
    # An older paper's sentence that a dev paper wrote word for word is the queried text: left out.
    by_text = HonestSplit(frozenset(), frozenset({"TnT is a tagger ."}))
    assert not by_text.keep(CitationEdge("P12-1001", "A00-1031", "TnT  is a\ntagger ."))
    assert by_text.keep(CitationEdge("P12-1001", "A00-1031", "TnT is a fast tagger ."))
    assert leaks(_IDS, split) == [
        "2020.acl-main.1",
        "P13-1001",
        "W12-9999",
        "W14-3301",
        "W15-0101",
        "not-an-acl-id",
    ]


_IDS = (
    "P12-1001",
    "J93-2004",
    "P13-1001",
    "W14-3301",
    "W15-0101",
    "2020.acl-main.1",
    "W12-9999",
    "not-an-acl-id",
)


def _import(store: Store, keep) -> None:
    for name in ("acl-citation-edges.tsv", "scisummnet-citances.jsonl"):
        assert citations.import_citation_file(store, SHARED_DATA / "citations" / name, keep=keep) > 0


def _dev_rows(citances: Path) -> list[dict]:
    rows = [json.loads(line) for line in citances.open(encoding="utf-8") if line.strip()]
    return [r for r in rows if is_acl_dev(r["citing"])]


def test_real_honest_store_holds_no_queried_sentence_citing_paper_or_later_citer(tmp_path: Path) -> None:
    """The store the ACL dev protocol ranks in, built from the shared citation files under the
    honest split: not one queried sentence, no edge or citing title of a dev paper, and nothing
    whose citing paper is of 2013 or later, in the edges or in what the ranking reads of them
    (``citations.expansions``, the texts BM25 and the ``cited-as`` list index). The same check on
    the earlier rule's store finds 2015's citers, so the test can fail."""
    require(ACL_XML)
    citances = require(SHARED_DATA / "citations" / "scisummnet-citances.jsonl")
    split = honest_split(citances)
    dev = _dev_rows(citances)
    assert split.dev_papers == {r["citing"] for r in dev} and len(dev) > 900
    store = Store(tmp_path / "acl.sqlite")
    # TnT and other much-cited 2000 papers, the dev papers of ACL 2013 (whose titles would be citing
    # titles if their edges came in) and ACL 2015 (later citers of the same papers).
    import_sources(store, [ACL_XML / f"{v}.xml" for v in ("A00", "P13", "P15")])
    _import(store, split.keep)
    citing = [r[0] for r in store.conn.execute("SELECT DISTINCT citing_ref FROM citation_edges")]
    assert len(citing) > 1000 and leaks(citing, split) == []
    contexts = {r[0] for r in store.conn.execute("SELECT context FROM citation_edges WHERE context != ''")}
    assert contexts and not contexts & {r["text"] for r in dev}
    late_titles = {
        title
        for title, acl_id in store.conn.execute("SELECT title, acl_id FROM papers WHERE acl_id != ''")
        if (acl_year(acl_id) or 0) >= FIRST_DEV_YEAR
    }
    assert len(late_titles) > 500
    texts = {t for exp in citations.expansions(store).values() for t in exp.texts}
    assert texts and not texts & late_titles and not texts & {r["text"] for r in dev}
    store.close()

    leaky = Store(tmp_path / "leaky.sqlite")
    import_sources(leaky, [ACL_XML / "A00.xml"])
    _import(leaky, leaky_keep)
    citing = [r[0] for r in leaky.conn.execute("SELECT DISTINCT citing_ref FROM citation_edges")]
    assert {acl_year(c) for c in leaks(citing, split)} == {2015}
    leaky.close()
