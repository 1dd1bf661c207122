"""unarXive full text (indexer/sources/unarxive.py) on the real sample: 49 arXiv papers of December
2022, whose body sentences citing a resolved bibliography entry become citing sentences of the
paper that entry names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewise.indexer import citations
from citewise.indexer.importer import expand_sources, import_sources
from citewise.indexer.sources.ids import canonical_ref
from citewise.indexer.sources.unarxive import entry_ref
from citewise.indexer.store import Store

from ..source_samples import edges, read_jsonl, sample, write_jsonl

SAMPLE = ("unarxive", "arXiv_src_2212_086.jsonl")
# In 2212.11867, bibliography entry 274b...326c is arXiv 2104.06921 (OpenAlex W4225968159).
CITING, CITED = "2212.11867", "2104.06921"


def _entry_ids(entry: dict) -> set[str]:
    """Every id an entry gives, each in its one spelling (tests/indexer/test_sources_merge.py checks those)."""
    ids = entry.get("ids") or {}
    written = [
        "arXiv:" + ids["arxiv_id"] if ids.get("arxiv_id") else "",
        ids.get("doi") or "",
        ids.get("open_alex_id") or "",
        "PMID:" + ids["pubmed_id"] if ids.get("pubmed_id") else "",
    ]
    return {canonical_ref(w) for w in written if w}


def test_papers_and_their_citing_sentences(tmp_path: Path) -> None:
    papers = read_jsonl(sample(*SAMPLE))
    assert expand_sources([sample(*SAMPLE)])[0][1] == "unarxive"
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [sample(*SAMPLE)])
    assert (stats.imported, stats.broken) == (49, 0) and store.count("arxiv != ''") == 49
    stored = edges(store)
    assert stats.citations == len(stored) > 500
    assert all("{{" not in e[2] for e in stored)
    # Every edge cites, by one of its ids, an entry that the paper's text cites.
    by_paper = {p["paper_id"]: p for p in papers}
    for citing, cited, _, _, _ in stored:
        paper = by_paper[citing]
        cited_keys = {s["ref_id"] for para in paper["body_text"] for s in para["cite_spans"]}
        assert any(
            cited in _entry_ids(paper["bib_entries"][k]) for k in cited_keys if k in paper["bib_entries"]
        )
    sentence = next(e[2] for e in stored if e[:2] == (CITING, CITED))
    assert sentence.startswith("This partial differential equation has been studied by analysts")
    store.close()


@pytest.mark.parametrize("cited_first", [True, False])
def test_the_cited_paper_gets_the_sentences_in_either_order(tmp_path: Path, cited_first: bool) -> None:
    """The cited paper as the arXiv snapshot would give it (its real title), before or after."""
    snapshot = read_jsonl(sample("arxiv", "arxiv-metadata-oai-snapshot.first200.jsonl"))[0]
    cited = {
        **snapshot,
        "id": CITED,
        "doi": None,
        "title": "On the dynamics of the roots of polynomials under differentiation",
    }
    path = write_jsonl(tmp_path / "cited.jsonl", [cited])
    store = Store(tmp_path / "s.sqlite")
    for source in [path, sample(*SAMPLE)] if cited_first else [sample(*SAMPLE), path]:
        import_sources(store, [source])
    pid = store.find(arxiv=CITED).id
    found = citations.expansions(store, [pid])[pid]
    assert any(t.startswith("This partial differential equation has been studied") for t in found.texts)
    citing_title = store.find(arxiv=CITING).title
    assert citing_title in found.texts and len(found.citing) >= 1
    store.close()


def test_entry_ids_in_order_of_preference() -> None:
    entry = {
        "ids": {
            "open_alex_id": "https://openalex.org/W4225968159",
            "doi": "10.1016/J.MATPUR.2022.04.001",
            "arxiv_id": "2104.06921v2",
            "pubmed_id": "",
        }
    }
    assert entry_ref(entry) == "2104.06921"
    assert entry_ref({"ids": {**entry["ids"], "arxiv_id": ""}}) == "10.1016/j.matpur.2022.04.001"
    assert entry_ref({"ids": {**entry["ids"], "arxiv_id": "", "doi": ""}}) == "openalex:W4225968159"
    assert entry_ref({"ids": {"pubmed_id": "36793855"}}) == "pmid:36793855"
    assert entry_ref({"bib_entry_raw": "A book."}) == ""


def test_a_bad_paper_is_reported_with_its_line(tmp_path: Path) -> None:
    papers = read_jsonl(sample(*SAMPLE))[:2]
    broken = {**papers[1], "metadata": {**papers[1]["metadata"], "title": None}}
    path = write_jsonl(tmp_path / "unarxive.jsonl", [papers[0], json.dumps(broken)[:200], broken])
    stats = import_sources(Store(tmp_path / "s.sqlite"), [path], fmt="unarxive")
    assert stats.imported == 1
    assert {p.line: p.message.split(":")[0] for p in stats.problems} == {2: "invalid JSON", 3: "no title"}
