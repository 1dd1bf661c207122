"""The Milvus engine against Milvus Lite 2.5.1 (the real Milvus binary, as a cluster runs it), on
real papers: twelve years of SIGIR from ACM-CR (~3,000 papers) imported into a store the test
writes. One Milvus Lite server per module (it takes a few seconds to start).

Skips with a message when pymilvus / milvus-lite (the ``milvus`` extra) or the data are absent.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from citewise.indexer.engine import EngineError
from citewise.indexer.engine_milvus import open_engine
from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store
from citewise.models.query import ContextQuery
from citewise.models.recommender import Recommender

from ..conftest import ACM_DL, require

pytest.importorskip("pymilvus", reason="the milvus extra (pymilvus) is not installed; skipping Milvus tests")
pytest.importorskip("milvus_lite", reason="milvus-lite is not installed; skipping Milvus tests")

YEARS = range(2009, 2021)
DIM = 16


def _norm(title: str) -> str:
    return " ".join(re.findall(r"\w+", title.lower()))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Store, Path]:
    """A store of SIGIR 2009-2020 and the Milvus Lite file beside it (written by the tests)."""
    folder = require(ACM_DL / "sigir")
    base = tmp_path_factory.mktemp("milvus")
    store = Store(base / "sigir.sqlite")
    import_sources(store, [str(folder / f"sigir-{y}.bib") for y in YEARS])
    assert store.count() > 2500
    return store, base / "lite.db"


@pytest.fixture(scope="module")
def engine(corpus):
    """The store written to a BM25-only collection (the shared Milvus Lite server of the module)."""
    store, lite = corpus
    eng = open_engine(f"milvus-lite:{lite}#papers")
    stats = eng.sync(store)
    assert stats.inserted == store.count() and not stats.updated
    yield eng
    eng.close()


def _vectors(store: Store, seed: int = 7):
    from citewise.indexer.engine_milvus import DenseVectors

    ids = [pid for (pid,) in store.conn.execute("SELECT id FROM papers ORDER BY id")]
    vecs = np.random.default_rng(seed).standard_normal((len(ids), DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return DenseVectors(f"random-{seed}", DIM, dict(zip(ids, vecs, strict=True)))


def test_every_paper_is_in_the_collection(corpus, engine) -> None:
    store, _ = corpus
    assert engine.count() == store.count()
    assert not engine.has_dense


def test_a_paper_is_found_by_its_own_title(corpus, engine) -> None:
    """The top hit is the paper itself, or a paper of the same title (ACM-CR holds duplicates)."""
    store, _ = corpus
    rows = store.conn.execute(
        "SELECT id, title FROM papers WHERE length(title) > 20 ORDER BY id LIMIT 200"
    ).fetchall()
    found = 0
    for pid, title in rows:
        hits = engine.search(title, 5)
        assert hits and all(score > 0 for _, score in hits)
        top = store.get(hits[0][0])
        found += hits[0][0] == pid or _norm(top.title) == _norm(title)
    assert found >= 0.97 * len(rows), f"{found} of {len(rows)} titles found themselves first"


def test_excluded_papers_never_come_back(corpus, engine) -> None:
    store, _ = corpus
    pid, title = store.conn.execute(
        "SELECT id, title FROM papers WHERE length(title) > 30 LIMIT 1"
    ).fetchone()
    assert pid in {h for h, _ in engine.search(title, 10)}
    assert pid not in {h for h, _ in engine.search(title, 10, mask=engine.exclusion({pid}))}


def test_the_recommender_ranks_from_milvus(corpus, engine) -> None:
    """The prefetch (three BM25 views + feedback) through Milvus; papers come from the store, and
    no local index is read or built to serve (the sync needed one for the statistics)."""
    store, lite = corpus
    local = Path(str(store.path) + ".bm25")
    shutil.rmtree(local)
    rec = Recommender(store, engine=f"milvus-lite:{lite}#papers", use_reranker=False)
    assert rec.engine.kind == "milvus-lite" and rec.mode() == "bm25"
    query = ContextQuery(
        "pseudo-relevance feedback expands the query with terms of the top-ranked documents",
        "Query expansion for ad hoc retrieval",
    )
    recs = rec.recommend(query, 10)
    assert len(recs) == 10
    assert any("feedback" in r.paper.title.lower() for r in recs[:5]), [r.paper.title for r in recs]
    assert not local.exists()  # nothing local was built


def test_a_collection_of_another_store_is_refused(tmp_path, corpus, engine) -> None:
    """Its ids would name other papers in this store: every suggestion would be wrong."""
    from ..lsp_harness import build_store

    other = Store(build_store(tmp_path / "other"))
    with pytest.raises(EngineError, match="written from another store"):
        Recommender(other, engine=f"milvus-lite:{corpus[1]}#papers", use_reranker=False)


def test_dense_and_hybrid_search(corpus, engine) -> None:
    """Dense (AUTOINDEX, cosine) finds a paper by its own vector; hybrid RRF by its title + vector."""
    store, lite = corpus
    eng = open_engine(f"milvus-lite:{lite}#dense")
    vectors = _vectors(store)
    eng.sync(store, vectors)
    assert eng.has_dense and eng.count() == store.count()
    pid, title = store.conn.execute(
        "SELECT id, title FROM papers WHERE length(title) > 30 LIMIT 1"
    ).fetchone()
    hits = eng.dense(vectors.rows[pid], 5)
    assert hits[0][0] == pid and hits[0][1] == pytest.approx(1.0, abs=1e-3)
    fused = eng.hybrid(title, vectors.rows[pid], 10)
    assert fused[0][0] == pid and fused[0][1] > fused[-1][1]
    assert pid not in {h for h, _ in eng.dense(vectors.rows[pid], 5, eng.exclusion({pid}))}


def test_an_interrupted_sync_resumes_and_a_resync_writes_nothing(corpus, engine) -> None:
    store, lite = corpus
    eng = open_engine(f"milvus-lite:{lite}#resume")
    eng.drop()

    def stop_after_first_batch(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        eng.sync(store, progress=stop_after_first_batch, batch=500)
    assert eng.count() == 500
    stats = eng.sync(store, batch=500)
    assert (stats.inserted, stats.unchanged, stats.updated) == (store.count() - 500, 500, 0)
    again = eng.sync(store)
    assert (again.inserted, again.updated, again.deleted, again.unchanged) == (0, 0, 0, store.count())
    gone = [pid for (pid,) in store.conn.execute("SELECT id FROM papers ORDER BY id DESC LIMIT 3")]
    eng.client.delete(eng.collection, ids=gone)
    assert eng.sync(store).inserted == 3


def test_papers_gone_from_the_store_leave_the_collection(tmp_path, corpus, engine) -> None:
    folder = require(ACM_DL / "sigir")
    store = Store(tmp_path / "small.sqlite")
    first, second = (str(folder / f"sigir-{y}.bib") for y in (2009, 2010))
    import_sources(store, [first, second])
    eng = open_engine(f"milvus-lite:{corpus[1]}#small")
    eng.drop()
    eng.sync(store)
    before = store.count()
    store.drop_source(str(Path(first).resolve()))
    stats = eng.sync(store)
    assert stats.deleted == before - store.count() > 0 and eng.count() == store.count()


def test_a_changed_paper_is_rewritten_and_found_by_its_new_words(tmp_path, corpus, engine) -> None:
    from ..lsp_harness import LIBRARY

    bib = tmp_path / "lib.bib"
    bib.write_text(LIBRARY.read_text(encoding="utf-8"), encoding="utf-8")
    store = Store(tmp_path / "lib.sqlite")
    import_sources(store, [str(bib)])
    eng = open_engine(f"milvus-lite:{corpus[1]}#changed")
    eng.drop()
    eng.sync(store)
    text = bib.read_text(encoding="utf-8")
    bib.write_text(
        text.replace("saturation and document length", "zanzibarite saturation", 1), encoding="utf-8"
    )
    import_sources(store, [str(bib)])
    stats = eng.sync(store)
    assert (stats.updated, stats.inserted, stats.deleted) == (1, 0, 0)
    (pid, _), *_ = eng.search("zanzibarite", 5)
    assert store.get(pid).key == "robertson2009probabilistic"


def test_the_server_keeps_its_own_milvus_lite_file_current(tmp_path, corpus, engine) -> None:
    """Papers the server imports (workspace .bib files) reach a Milvus Lite collection; a cluster's
    collection (the lab's corpus) is never written by a language server."""
    from citewise.models.engines import sync_owned

    from ..lsp_harness import LIBRARY, write_jsonl

    store = Store(tmp_path / "own.sqlite")
    import_sources(store, [str(LIBRARY)])
    spec = f"milvus-lite:{corpus[1]}#owned"
    eng = open_engine(spec)
    eng.drop()
    eng.sync(store)
    before = store.count()
    import_sources(store, [str(write_jsonl(tmp_path))])
    assert sync_owned(store, spec)["inserted"] == store.count() - before > 0
    assert eng.count() == store.count()
    assert sync_owned(store, "milvus://127.0.0.1:9/lab") == {}  # not even a connection attempt


def test_index_and_search_through_the_cli(tmp_path, capsys) -> None:
    """``citewise index --engine`` writes (and on a rerun skips) the papers; ``search --engine``
    ranks from the collection."""
    from citewise.cli import main

    from ..lsp_harness import LIBRARY

    store, spec = tmp_path / "lib.sqlite", f"milvus-lite:{tmp_path / 'cli.db'}"
    args = ["index", str(LIBRARY), "--store", str(store), "--engine", spec, "--json", "--quiet"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["engine"]
    assert first["inserted"] == first["papers"] > 0
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["engine"]
    assert (second["inserted"], second["unchanged"]) == (0, first["papers"])
    assert main(["search", "dense passage retrieval", "--store", str(store), "--engine", spec, "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits and "Dense Passage Retrieval" in hits[0]["title"]


def test_an_unreachable_milvus_is_one_line(tmp_path, capsys) -> None:
    from citewise.cli import main

    from ..lsp_harness import build_store

    store = build_store(tmp_path / "s")
    with pytest.raises(EngineError, match="cannot reach Milvus"):
        open_engine("milvus://127.0.0.1:9/papers", timeout=3)
    code = main(["search", "retrieval", "--store", str(store), "--engine", "milvus://127.0.0.1:9/papers"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.startswith("citewise: error: milvus://127.0.0.1:9/papers") and "\n" not in err


def test_dense_vectors_are_copied_and_searched_in_milvus(tmp_path, corpus, engine) -> None:
    """The store's dense embeddings go to the collection's dense field; a recommender on it encodes
    the query locally and finds the neighbours the local index finds."""
    pytest.importorskip("onnxruntime", reason="onnxruntime is needed to embed with the dense model")
    from citewise.models import dense_index
    from citewise.models.engines import store_vectors, sync_engine

    store, _ = corpus
    if dense_index.build_index(store) is None:
        pytest.skip("no dense model installed (models/dense)")
    vectors = store_vectors(store)
    assert vectors is not None and len(vectors.rows) == store.count()
    spec = f"milvus-lite:{tmp_path / 'dense.db'}#papers"
    summary = sync_engine(store, spec)
    assert summary["dense"] and summary["inserted"] == store.count()
    rec = Recommender(store, engine=spec, prefetch_mode="hybrid", use_reranker=False)
    local = dense_index.load_dense_source(store)
    query = ContextQuery("learning to rank with click models of user browsing behaviour")
    remote_top = [pid for pid, _ in rec.dense.search_query(query, 10)]
    local_top = [pid for pid, _ in local.search_query(query, 10)]
    assert len(set(remote_top) & set(local_top)) >= 9, (remote_top, local_top)
    recs = rec.recommend(query, 10)
    assert len(recs) == 10 and any("dense" in r.candidate.ranks for r in recs)


# -- issue 28: the citing field, the count prior, the schema, shards ------------------------------
ACL_VOLUMES = ("A00", "P02", "W00")  # ANLP 2000 (TnT, cited often), ACL 2002, the 2000 workshops


@pytest.fixture(scope="module")
def cited(tmp_path_factory, corpus):
    """A small real ACL store with the shared citation edges and ScisummNet sentences (their
    2013-2014 citers left out, as the evaluation store does), written to a collection of the
    module's Milvus Lite file; the dev sentences that cite its papers are the queries."""
    from citewise.evaluation import protocol as ev
    from citewise.indexer import citations

    from ..conftest import ACL_XML, SHARED_DATA
    from .test_citations import _acl_store_module

    require(ACL_XML)
    edges = require(SHARED_DATA / "citations" / "acl-citation-edges.tsv")
    citances = require(SHARED_DATA / "citations" / "scisummnet-citances.jsonl")
    store = Store(tmp_path_factory.mktemp("acl") / "acl.sqlite")
    import_sources(store, [str(ACL_XML / f"{v}.xml") for v in ACL_VOLUMES])
    not_dev = _acl_store_module().not_dev
    for path in (edges, citances):
        citations.import_citation_file(store, path, keep=not_dev)
    spec = f"milvus-lite:{corpus[1]}#acl"
    eng = open_engine(spec)
    eng.drop()
    eng.sync(store)
    queries, own = ev.load_acl_dev_queries(citances, store)
    assert len(queries) >= 20
    return store, spec, eng, queries, own


def _ranks(rec: Recommender, queries, own) -> list[int | None]:
    """Each dev sentence's first relevant paper's rank in the full BM25 prefetch (the citing
    paper itself excluded), or None past 100."""
    ids = {pid: acl for pid, acl in rec.store.conn.execute("SELECT id, acl_id FROM papers")}
    out = []
    for q in queries:
        excluded = {own[q.citing_doi]} if q.citing_doi in own else set()
        cands = rec.prefetcher(excluded).candidates(q.query, 100, "bm25")
        out.append(next((i for i, c in enumerate(cands, 1) if ids[c.paper_id] in q.relevant), None))
    return out


def _mrr(ranks: list[int | None]) -> float:
    return sum(1 / r for r in ranks if r) / len(ranks)


def test_the_local_impacts_and_the_counts_are_in_the_collection(cited) -> None:
    """Each paper's sparse vector is the local index's impacts (own fields and citing field, the
    local statistics), keyed by term id; its citation count is there for the prior."""
    from citewise.indexer import bm25_files, citations
    from citewise.indexer.engine_milvus import SCHEMA_VERSION, sparse

    store, _, eng, _, _ = cited
    assert eng.schema_version == SCHEMA_VERSION == 3 and eng.citing_counts.any()
    tnt = store.conn.execute("SELECT id FROM papers WHERE acl_id='A00-1031'").fetchone()[0]
    exp = citations.expansions(store, [tnt])[tnt]
    (row,) = eng.client.query(eng.collection, ids=[tnt], output_fields=["impacts", "cited_by"])
    assert row["cited_by"] == len(exp.citing) > 10
    local = bm25_files.load_or_build(store)
    p = store.get(tnt)
    ((_, want),) = local.doc_impacts([(tnt, p.title, p.abstract, p.keywords, exp.text, len(exp.citing))])
    got = {int(k): v for k, v in row["impacts"].items()}
    assert set(got) == set(sparse(want)) and len(got) > 50
    assert max(abs(got[k] - v) for k, v in sparse(want).items()) < 1e-6
    # A sentence that names the tagger without its title's words finds it through the citing field.
    hits = eng.search("we tagged the corpus with the trigram tagger of Brants", 10)
    assert tnt in [pid for pid, _ in hits[:3]], hits
    assert eng.citing_count([tnt, -1]).tolist() == [len(exp.citing), 0]


def test_milvus_scores_every_query_as_the_local_index_does(cited) -> None:
    """Same impacts, same query weights: each view's list through Milvus is the local index's,
    paper for paper and score for score (inner product = local BM25F), on every dev sentence."""
    store, spec, eng, queries, _ = cited
    local = Recommender(store, use_dense=False, use_reranker=False).bm25
    for q in queries:
        terms = Counter(local.tokenizer(f"{q.query.local} {q.query.citing_title}"))
        mine, theirs = local.search(terms, 50), eng.search(terms, 50)
        assert len(mine) == len(theirs)
        scores = [s for _, s in mine]
        assert [s for _, s in theirs] == pytest.approx(scores, rel=1e-5)
        local_score = dict(mine)
        for i, (pid, _) in enumerate(theirs):  # the same paper at each place, or one tied with it
            tied = local_score.get(pid, scores[-1])  # one the local list cut off ties with its last
            assert pid == mine[i][0] or abs(tied - scores[i]) <= 1e-5 * scores[i], (i, q.qid)


def test_milvus_ranks_a_store_with_citation_data_like_the_local_engine(cited) -> None:
    """The full prefetch (three views, feedback with the collection's document frequencies, the
    count prior) of the dev sentences that cite the store's papers: through Milvus the relevant
    papers come at the local engine's ranks (ties aside)."""
    store, spec, eng, queries, own = cited
    local = Recommender(store, use_dense=False, use_reranker=False)
    milvus = Recommender(store, engine=spec, use_dense=False, use_reranker=False)
    texts = local.feedback_texts([pid for (pid,) in store.conn.execute("SELECT id FROM papers LIMIT 10")])
    assert milvus.bm25.expansion_terms(texts) == local.bm25.expansion_terms(texts)
    local_ranks, milvus_ranks = _ranks(local, queries, own), _ranks(milvus, queries, own)
    same = sum(a == b for a, b in zip(local_ranks, milvus_ranks, strict=True))
    assert same >= 0.9 * len(queries), (local_ranks, milvus_ranks)
    assert abs(_mrr(milvus_ranks) - _mrr(local_ranks)) <= 0.03
    cands = milvus.prefetcher().candidates(queries[0].query, 50, "bm25")
    assert any("citations" in c.ranks for c in cands)  # the count prior voted


def test_the_views_go_to_milvus_in_parallel_and_rank_the_same(cited) -> None:
    store, spec, eng, queries, _ = cited
    rec = Recommender(store, engine=spec, use_dense=False, use_reranker=False)
    pf = rec.prefetcher()
    together = [pf.source_lists(q.query, "bm25") for q in queries[:5]]
    rec.bm25.parallel_queries = False
    try:
        apart = [pf.source_lists(q.query, "bm25") for q in queries[:5]]
    finally:
        rec.bm25.parallel_queries = True
    assert [list(x) for x in together] == [list(x) for x in apart]  # same views, same order
    for a, b in zip(together, apart, strict=True):
        assert {k: [p for p, _ in v] for k, v in a.items()} == {k: [p for p, _ in v] for k, v in b.items()}


def test_an_old_schema_collection_is_refused_then_rebuilt_by_a_sync(cited, monkeypatch, caplog) -> None:
    from citewise.indexer import bm25_files, engine_milvus

    store, spec, _, _, _ = cited
    old_spec = spec.replace("#acl", "#acl_old")
    eng = open_engine(old_spec)
    eng.drop()
    with monkeypatch.context() as m:
        m.setattr(engine_milvus, "SCHEMA_VERSION", 1)
        eng.create(None, bm25_files.load_or_build(store))
    eng._meta = None
    with pytest.raises(EngineError, match=r"older citewise \(collection schema 1.*citewise index"):
        Recommender(store, engine=old_spec, use_reranker=False)
    with caplog.at_level("WARNING"):
        stats = eng.sync(store)
    assert stats.recreated and stats.inserted == store.count()
    assert "collection schema 1" in caplog.text and "rebuilding it with schema 3" in caplog.text
    assert Recommender(store, engine=old_spec, use_reranker=False).bm25.schema_version == 3


def test_new_citation_data_rewrites_only_the_papers_it_changes(tmp_path, cited) -> None:
    from citewise.indexer import citations

    store, spec, _, _, _ = cited
    eng = open_engine(spec.replace("#acl", "#acl_more"))
    eng.drop()
    eng.sync(store)
    tnt = store.conn.execute("SELECT id FROM papers WHERE acl_id='A00-1031'").fetchone()[0]
    more = tmp_path / "more.tsv"
    more.write_text("citing\tcited\tcontext\nX99-0001\tA00-1031\tzanzibarite tagging with TnT\n")
    citations.import_citation_file(store, more)
    try:
        stats = eng.sync(store)
        assert (stats.updated, stats.inserted) == (1, 0)
        assert eng.search("zanzibarite", 3)[0][0] == tnt
    finally:
        citations.drop_citation_source(store, str(more.resolve()))


def test_the_shard_number_is_part_of_the_engine_spec(corpus) -> None:
    from citewise.indexer.engine import parse_engine

    spec = parse_engine("milvus://milvus.lab:19530/lab?shards=4")
    assert (spec.collection, spec.shards) == ("lab", 4) and parse_engine(str(spec)) == spec
    assert parse_engine("milvus://h:1/lab").shards == 0
    for bad in ("milvus://h:1/lab?shards=0", "milvus://h:1/lab?shards=x", "milvus://h:1/lab?replicas=2"):
        with pytest.raises(EngineError):
            parse_engine(bad)
    # Milvus Lite accepts the number and ignores it (one process, one shard).
    from citewise.indexer import bm25_files

    eng = open_engine(f"milvus-lite:{corpus[1]}#sharded?shards=2")
    eng.drop()
    eng.create(None, bm25_files.load_or_build(corpus[0]))
    assert eng.exists()
    eng.drop()
