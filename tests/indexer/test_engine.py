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
from citewise.indexer.engine_milvus import query_vector, sparse, term_id
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


def test_query_terms_keep_their_weights_under_stable_term_ids() -> None:
    """A query is the local index's weighted terms, keyed as the collection's impacts are: the
    same key for a term in every process (the collection outlives any one index build)."""
    assert term_id("rank") == term_id("rank") != term_id("ranking")
    assert 0 <= term_id("") < 2**32 - 1 and all(0 <= term_id(t) < 2**32 - 1 for t in ("a", "é", "x" * 99))
    assert query_vector(Counter({"ranking": 1, "neural": 2})) == {
        term_id("ranking"): 1.0,
        term_id("neural"): 2.0,
    }
    assert query_vector(Counter({"own": 1.0, "rest": 0.5}))[term_id("rest")] == 0.5
    assert query_vector(Counter({"a": 3}), dedupe=True) == {term_id("a"): 1.0}
    assert query_vector(Counter()) == {} and sparse({"zero": 0.0}) == {}


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
