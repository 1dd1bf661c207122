"""The search-engine interface without Milvus: spec parsing, the settings and CLI checks, the
query text sent to Milvus, and the local engine being exactly the prefetch of before."""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np
import pytest

from citewise.cli_engine import engine_arg
from citewise.indexer.bm25 import BM25Index, BM25Params
from citewise.indexer.engine import EngineError, exclusion_for, parse_engine
from citewise.indexer.engine_milvus import MAX_TEXT_BYTES, query_text, search_text
from citewise.models.prefetch import Prefetcher
from citewise.models.query import ContextQuery
from citewise.settings import Settings

DOCS = [
    (10, "Pseudo relevance feedback for ad hoc retrieval", "Expands the query with feedback terms.", ""),
    (11, "Dense passage retrieval", "A dual encoder trained with in-batch negatives.", "retrieval"),
    (12, "Relevance feedback in vector space models", "Rocchio's method moves the query vector.", ""),
    (13, "Learning to rank with gradient boosted trees", "LambdaMART optimises nDCG directly.", ""),
]


def test_specs_parse_to_what_they_name(tmp_path) -> None:
    assert parse_engine(None).is_local and parse_engine("local").is_local
    cluster = parse_engine("milvus://db.lab:19530/acm")
    assert (cluster.kind, cluster.uri, cluster.collection) == ("milvus", "http://db.lab:19530", "acm")
    assert parse_engine("milvus+https://db.lab:443/acm").uri == "https://db.lab:443"
    lite = parse_engine(f"milvus-lite:{tmp_path}/papers.db#mine")
    assert (lite.kind, lite.uri, lite.collection) == ("milvus-lite", f"{tmp_path}/papers.db", "mine")
    assert parse_engine(f"milvus-lite:{tmp_path}/papers.db").collection == "citewise"
    for spec in ("milvus://db.lab:19530/acm", f"milvus-lite:{tmp_path}/p.db#x", "local"):
        assert str(parse_engine(spec)) == spec  # what the settings keep parses back to the same


@pytest.mark.parametrize(
    "spec",
    ["milvus:foo", "papers.db", "milvus-lite:papers.sqlite", "milvus://db.lab/acm", "milvus://h:1/bad-name"],
)
def test_bad_specs_say_which_forms_are_accepted(spec: str) -> None:
    with pytest.raises(EngineError, match="--engine"):
        parse_engine(spec)
    with pytest.raises(argparse.ArgumentTypeError):
        engine_arg(spec)


def test_the_engine_setting_is_checked_and_defaults_to_local() -> None:
    assert Settings().engine == "local"
    ok, problems = Settings.from_dict({"engine": "milvus://db.lab:19530/acm"})
    assert ok.engine == "milvus://db.lab:19530/acm" and not problems
    bad, problems = Settings.from_dict({"engine": "elastic://x"})
    assert bad.engine == "local" and len(problems) == 1 and "engine" in problems[0]


def test_weighted_query_words_keep_their_ratios_as_repeated_words() -> None:
    assert query_text(Counter({"ranking": 1, "neural": 2})).split() == ["ranking", "neural", "neural"]
    words = query_text(Counter({"own": 1.0, "rest": 0.5})).split()
    assert words.count("own") == 2 * words.count("rest") == 2
    assert query_text(Counter({"a": 3}), dedupe=True) == "a"
    assert query_text(Counter()) == ""


def test_search_text_fits_a_milvus_varchar() -> None:
    text = search_text("Title", "é" * MAX_TEXT_BYTES, "kw")
    assert len(text.encode("utf-8")) <= MAX_TEXT_BYTES and text.startswith("Title\n")


def test_the_local_engine_is_the_prefetch_of_before() -> None:
    """A bare BM25 index through the engine interface: the same mask, the same lists."""
    index = BM25Index.build(DOCS, BM25Params(), generation=1)
    excluded = {12}
    mask = exclusion_for(index, excluded)
    assert np.array_equal(mask, ~index.mask_for(excluded))
    query = ContextQuery("relevance feedback expands the query", "Query expansion", "")
    lists = Prefetcher(index, excluded=excluded).source_lists(query, "bm25")
    for name, items in lists.items():
        if name == "bm25:prf":
            continue
        assert 12 not in {pid for pid, _ in items}, name
    plain = index.search("relevance feedback expands the query", 10, mask=mask)
    assert plain and plain[0][0] == 10 and 12 not in {pid for pid, _ in plain}


def test_milvus_query_words_are_unstemmed_and_unfolded() -> None:
    """Milvus's analyzer stems and keeps accents itself, so the query words must reach it as written."""
    from citewise.indexer.engine_milvus import MilvusEngine

    words = MilvusEngine.tokenizer("Schütze ranks the retrieved documents, e.g. with BM25")
    assert words == ["schütze", "ranks", "retrieved", "documents", "bm25"]
