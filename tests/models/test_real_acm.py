"""The whole ACM-CR collection: import counts checked against our own count, BM25 protocol check.

Slow (about two minutes for the import on 2 cores), so marked ``slow``; CI runs it.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from citewise.evaluation import protocol as ev
from citewise.indexer.bm25_files import load_or_build
from citewise.models.prefetch import Prefetcher

from ..conftest import ACM_BLACKLIST, ACM_DEV, ACM_DL, require

pytestmark = pytest.mark.slow

ENTRY = re.compile(r"^@(\w+)\{\s*([^,\s]+),", re.M)
TITLE = re.compile(r"^\s*title\s*=\s*\{+(.*)", re.M)
ABSTRACT = re.compile(r"^\s*abstract\s*=", re.M)


def own_count() -> dict:
    """Count entries with plain regexes, independently of bibtexparser and the store."""
    files = sorted(ACM_DL.rglob("*.bib"))
    entries = 0
    types: Counter[str] = Counter()
    paper_keys: set[str] = set()
    sessions = 0
    for f in files:
        text = f.read_text(encoding="utf-8")
        chunks = re.split(r"\n(?=@\w+\{)", text)
        for chunk in chunks:
            m = ENTRY.search(chunk)
            if not m:
                continue
            entries += 1
            etype = m.group(1).lower()
            types[etype] += 1
            t = TITLE.search(chunk)
            if t and t.group(1).lower().startswith("session details") and not ABSTRACT.search(chunk):
                sessions += 1
                continue
            if etype in ("inproceedings", "article"):
                paper_keys.add(m.group(2).lower())
    return {
        "files": len(files),
        "entries": entries,
        "types": types,
        "sessions": sessions,
        "papers": paper_keys,
    }


def test_import_matches_own_count(acm_store) -> None:
    own = own_count()
    assert own["files"] == 903 and own["entries"] == 113_512
    stats = getattr(acm_store, "import_stats", None)
    if stats is not None:
        assert stats.broken == 0, [str(p) for p in stats.problems[:5]]
        seen = stats.imported + stats.duplicates + stats.skipped
        assert seen == own["entries"]
        assert stats.skipped - own["sessions"] <= 11, "only session records are skipped"
    stored = {
        d
        for (d,) in acm_store.conn.execute(
            "SELECT doi FROM papers WHERE entry_type IN ('inproceedings','article')"
        )
    }
    # Every paper of our count is in the store, under its (case-folded) DOI ...
    missing = own["papers"] - {d for (d,) in acm_store.conn.execute("SELECT doi FROM papers")}
    assert not missing, sorted(missing)[:5]
    # ... and the only differences are DOIs that the export repeats under another entry type.
    assert len(own["papers"]) - len(stored) <= 2
    assert len(stored) >= 108_900
    with_abstract = acm_store.count("abstract != '' AND entry_type IN ('inproceedings','article')")
    assert 98_100 <= with_abstract <= 98_300


def test_cleaned_text_has_no_markup(acm_store) -> None:
    leftovers = acm_store.count("title LIKE '%<sup>%' OR title LIKE '%{%' OR title LIKE '%\\''%' ESCAPE '!'")
    assert leftovers == 0
    assert acm_store.count("abstract LIKE '%<sup>%' OR abstract LIKE '%</i>%'") == 0


def test_bm25_reproduces_the_reference_rows(acm_store) -> None:
    require(ACM_DEV)
    index = load_or_build(acm_store)
    coll = ev.acmcr_collection(acm_store, ev.load_blacklist(ACM_BLACKLIST))
    doi_of, excluded = coll.doi_of, coll.excluded
    assert len(coll.dois) == 108_856  # 108,857 in the data README: see test_import_matches_own_count
    queries = ev.load_dev_queries(ACM_DEV, coll.dois)
    assert len(queries) == 336 and sum(len(q.relevant) for q in queries) == 543
    pf = Prefetcher(index, excluded=excluded)
    fused = ev.evaluate(lambda q: [doi_of[c.paper_id] for c in pf.candidates(q.query, 1000, "bm25")], queries)
    # The reference: RRF of the three BM25 views R@10 0.481, R@200 0.748, R@1000 0.857.
    assert fused["R@10"] == pytest.approx(0.481, abs=0.02)
    assert fused["R@200"] == pytest.approx(0.748, abs=0.02)
    assert fused["R@1000"] == pytest.approx(0.857, abs=0.02)
