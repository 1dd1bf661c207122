"""The recommender's side of the search engines (``indexer/engine.py``): which text and dense
sources a store is served from, and what ``citewise index --engine`` copies to a remote engine.

Why here and not in ``indexer``: the dense half needs the dense encoder and its index, which
are the recommender's business (``indexer`` never imports ``models``).
"""

from __future__ import annotations

import logging
from typing import Any

from citewise.indexer.engine import EngineError, EngineSpec, Progress, parse_engine
from citewise.indexer.engine_milvus import open_engine
from citewise.indexer.store import Store

log = logging.getLogger(__name__)


def open_remote(store: Store, spec: str | EngineSpec, use_dense: bool = True) -> tuple[Any, Any]:
    """(text engine, dense source or None) served from a remote engine's collection.

    The collection must exist and be of the current schema (``citewise index --engine SPEC``
    writes or rebuilds it): serving never copies a corpus, which can take minutes. Its dense field is used only when the installed dense
    model is the one whose vectors it holds (a query vector of another model means nothing)."""
    engine = open_engine(spec, store)
    if not engine.exists():
        raise EngineError(
            f"{engine.spec}: no such collection; write the store to it with "
            f"`citewise index --store {store.path} --engine {engine.spec}`"
        )
    engine.check_schema()  # an older collection lacks the citing field: rewrite it first
    engine.ready()
    check_same_store(store, engine)
    dense = None
    want = engine.meta().get("dense_model", "")
    if use_dense and want:
        dense = _milvus_dense(store, engine, want)
    return engine, dense


def check_same_store(store: Store, engine: Any) -> None:
    """Refuse a collection written from another store: its ids would name other papers here, and
    every suggestion would be a wrong paper (a lab whose editors point at the wrong store file).
    A copy of the right store that is somewhat behind still passes: most sampled papers match."""
    sample = engine.sample()
    if not sample:
        return
    marks = ",".join("?" * len(sample))
    rows = store.conn.execute(
        f"SELECT id, content_hash FROM papers WHERE id IN ({marks})", tuple(sample)
    ).fetchall()
    same = sum(1 for pid, chash in rows if sample.get(pid) == chash[:16])
    if same * 2 < len(sample):
        raise EngineError(
            f"{engine.spec}: written from another store than {store.path} ({same} of {len(sample)} "
            "sampled papers match); point the store setting at the store the collection was indexed "
            f"from, or write this one with `citewise index --store {store.path} --engine {engine.spec}`"
        )


def _milvus_dense(store: Store, engine: Any, model_hash: str) -> Any:
    from citewise.indexer.engine_milvus import MilvusDense

    from .dense_index import ModelError, open_index

    try:
        index = open_index(store)
    except (ModelError, ImportError) as exc:
        log.warning("%s; the collection's dense vectors are not used", exc)
        return None
    if index is None or index.encoder.model_hash != model_hash:
        log.info("%s: dense vectors of another model than the installed one; BM25 only", engine.spec)
        return None
    return MilvusDense(engine, index.encoder)


def store_vectors(store: Store) -> Any:
    """The store's dense vectors for a remote engine, or None when the store has no up-to-date
    embedding index (then the collection holds BM25 only)."""
    from citewise.indexer.engine_milvus import DenseVectors

    from .dense_index import ModelError, open_index

    try:
        index = open_index(store)
    except (ModelError, ImportError) as exc:
        log.warning("%s; copying BM25 text only", exc)
        return None
    if index is None or not index.load():
        return None
    ids, vecs = index.vectors()
    rows = {int(pid): vecs[i] for i, pid in enumerate(ids)}
    return DenseVectors(index.encoder.model_hash, int(vecs.shape[1]), rows)


def sync_engine(store: Store, spec: str, progress: Progress | None = None, dense: bool = True) -> dict:
    """What ``citewise index --engine`` does after the import: copy the store (and its vectors when
    it has them) to the engine, skipping papers already there. Returns the summary."""
    parsed = parse_engine(spec)
    if parsed.is_local:
        return {}
    engine = open_engine(parsed, store)
    try:
        vectors = store_vectors(store) if dense else None
        stats = engine.sync(store, vectors, progress)
        out = stats.as_dict()
        out.update(engine=str(parsed), papers=engine.count(), dense=bool(vectors))
        return out
    finally:
        engine.close()


def sync_owned(store: Store, spec: str) -> dict:
    """Write papers the server imported (the workspace's ``.bib`` files) to a Milvus Lite file,
    which belongs to this user and this store; the client stays open, since the serving recommender
    shares the Milvus Lite process. A cluster collection is never written by a language server:
    it is the lab's corpus, under the store ids of the lab's store (docs/scaling.md)."""
    parsed = parse_engine(spec)
    if parsed.kind != "milvus-lite":
        return {}
    try:
        engine = open_engine(parsed, store)
        if not engine.exists():
            return {}
        # Vectors only into a collection that has them: a BM25-only file stays BM25-only.
        return engine.sync(store, store_vectors(store) if engine.has_dense else None).as_dict()
    except EngineError as exc:  # the recommender then serves what the collection holds
        log.warning("%s; the papers just imported are not searchable until it is fixed", exc)
        return {}
