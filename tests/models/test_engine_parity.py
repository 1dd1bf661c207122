"""The same ACM-CR dev R@10 and MRR through Milvus (Lite 2.5.1) as through the local engine, within
``engine_eval.TOLERANCE``: the whole collection (~110k papers) is written to Milvus Lite and both
engines run the full BM25 prefetch over the 336 dev queries. Slow (a minute or two here).

Why a tolerance and not equality: the two engines score with the same impacts and query weights
(collection schema 3), but float sums in another order can break ties the other way; see
models/engine_eval.py and docs/scaling.md.
"""

from __future__ import annotations

import pytest

from citewise.evaluation import engines as engine_eval
from citewise.evaluation import protocol as ev
from citewise.indexer.engine_milvus import open_engine
from citewise.models.recommender import Recommender

from ..conftest import ACM_BLACKLIST, ACM_DEV, require

pytest.importorskip("pymilvus", reason="the milvus extra (pymilvus) is not installed; skipping Milvus tests")
pytest.importorskip("milvus_lite", reason="milvus-lite is not installed; skipping Milvus tests")


@pytest.mark.slow
def test_milvus_ranks_acm_cr_dev_as_well_as_the_local_engine(acm_store, tmp_path) -> None:
    require(ACM_DEV)
    spec = f"milvus-lite:{tmp_path / 'acm.db'}#acmcr"
    engine = open_engine(spec)
    stats = engine.sync(acm_store, batch=2000)
    assert stats.inserted == acm_store.count() == engine.count()
    coll = ev.acmcr_collection(acm_store, ev.load_blacklist(require(ACM_BLACKLIST)))
    queries = ev.load_dev_queries(ACM_DEV, coll.dois)
    assert len(queries) > 300
    runs = {}
    for name, spec_or_local in (("local", "local"), ("milvus", spec)):
        rec = Recommender(
            acm_store, prefetch_mode="bm25", use_dense=False, use_reranker=False, engine=spec_or_local
        )
        runs[name] = engine_eval.run_engine(rec, queries, coll)
    local, milvus = runs["local"].metrics, runs["milvus"].metrics
    for key in ("R@10", "MRR"):
        assert abs(milvus[key] - local[key]) <= engine_eval.TOLERANCE, (key, local, milvus)
    assert engine_eval.top10_overlap(runs["local"], runs["milvus"]) > 0.5
    engine.close()
