"""Milvus as the search engine: full-text BM25, optional dense vectors, hybrid search.

One collection per corpus: the store's paper id (INT64 primary key, so the SQLite store turns a
hit into a paper), a 16-character content hash (so a resumed or repeated ``citewise index``
skips what is already there), the paper's BM25 impacts as a sparse vector (``impacts``:
SPARSE_INVERTED_INDEX, inner product), the number of papers citing it (``cited_by``, the count
prior), a hash of its citing text and count (``chash``, so new citation data rewrites exactly the
papers it changes), and a dense vector (AUTOINDEX, cosine) only when the store has a dense index
to copy.

Schema 3 (issue 28): the impacts are the local BM25 index's own (``BM25Index.doc_impacts``: the
BM25F of the own fields and the citing field, with the local tokenizer, N, mean lengths and
document frequencies), keyed by a hash of the term (:func:`term_id`), and a query is the local
index's weighted query terms under the same keys, so Milvus's inner product is the local score:
the two engines rank alike by construction. Schema 2 had Milvus's own BM25 Function over an
analysed text field, which cannot keep the citing field's length normalisation apart from the own
text's (ACL dev R@10 0.050 below local, docs/scaling.md). The price: the statistics are fixed
when a paper is written, as in the local index's delta; a sync rewrites the whole collection when
the store has grown or shrunk by more than the delta's share since (:meth:`MilvusEngine.sync`).

Why Milvus Lite 2.5.1 and not 3.x: 2.5.1 runs the real Milvus binary (same analyzer, BM25 and
filters as a cluster); 3.x is a pure-Python reimplementation measured 100x slower with negative
BM25 scores and filters ignored (issue 19). pymilvus is imported lazily: citewise runs without it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import warnings
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from . import bm25_files, citations
from .bm25 import BM25Index, Tokenizer, feedback_terms, idf
from .engine import EngineError, EngineSpec, Progress, parse_engine

if TYPE_CHECKING:
    from .store import Store

log = logging.getLogger(__name__)

# 1: text + sparse (+ dense). 2: the citing field, its sparse vector, cited_by and chash. 3: the
# local index's impacts as the sparse vector, no text fields (issue 28).
SCHEMA_VERSION = 3
# Sparse vector dimensions Milvus accepts: 0 .. 2**32 - 2.
_TERM_IDS = 0xFFFFFFFF
# Milvus Lite's gRPC server allows a keepalive ping only every 5 minutes while no data flows; the
# client's default (every 10 s, also between calls) made it hang up during a long flush of 110k
# papers ("too_many_pings"), and the next client of the same file then failed to reconnect. A
# local socket needs no keepalive; the longer connect timeout rides out a server busy indexing.
LITE_GRPC = {"grpc.keepalive_time_ms": 600_000, "grpc.keepalive_permit_without_calls": False}
INSTALL_HINT = "install the milvus extra: pip install 'citewise[milvus]' (pymilvus, milvus-lite==2.5.1)"


def _pymilvus() -> Any:
    """pymilvus, imported on first use; milvus-lite 2.5.1 warns that pkg_resources is deprecated."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pymilvus
        # An iterator over an empty Milvus Lite collection warns that it fell back to a client
        # timestamp: harmless, and it would reach the editor's log as a warning.
        logging.getLogger("pymilvus.orm.iterator").setLevel(logging.ERROR)
    except ImportError as exc:
        raise EngineError(f"the Milvus engine needs pymilvus ({exc}); {INSTALL_HINT}") from exc
    return pymilvus


def _connect(spec: EngineSpec, timeout: float) -> Any:
    """A MilvusClient for the spec, or an EngineError saying why none could be made."""
    pm = _pymilvus()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if spec.kind == "milvus-lite":
                os.makedirs(os.path.dirname(os.path.abspath(spec.uri)), exist_ok=True)
                return pm.MilvusClient(spec.uri, timeout=max(timeout, 60.0), grpc_options=LITE_GRPC)
            token = os.environ.get("CITEWISE_MILVUS_TOKEN", "")
            return pm.MilvusClient(spec.uri, token=token, timeout=timeout)
    except pm.exceptions.ConnectionConfigException as exc:
        if spec.kind == "milvus-lite" and "Open local milvus failed" in str(exc):
            raise EngineError(
                f"{spec}: cannot open the Milvus Lite file (is another citewise process using it? "
                "Milvus Lite serves one process per file; use a Milvus server for several)"
            ) from exc
        raise EngineError(f"{spec}: {getattr(exc, 'message', exc)}; {INSTALL_HINT}") from exc
    except pm.exceptions.MilvusException as exc:
        raise EngineError(f"{spec}: cannot reach Milvus ({getattr(exc, 'message', exc)})") from exc


def term_id(term: str) -> int:
    """A term's sparse dimension: a stable hash, the same in every process and on every machine
    (the collection outlives the local index, whose term numbers change on each rebuild). Two of a
    million terms share a dimension about once in 8,600 pairs: their impacts then add up."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little") % _TERM_IDS


def sparse(weights: dict[str, float]) -> dict[int, float]:
    """Term weights (a query's, or a paper's impacts) as a sparse vector under :func:`term_id`."""
    out: dict[int, float] = {}
    for term, w in weights.items():
        if w:
            key = term_id(term)
            out[key] = out.get(key, 0.0) + float(w)
    return out


def query_vector(terms: Counter[str], dedupe: bool = False) -> dict[int, float]:
    """Weighted query terms as the local index weighs them (``dedupe``: each once)."""
    return sparse({t: (1.0 if dedupe else float(n)) for t, n in terms.items()})


def citing_hash(text: str, count: int) -> str:
    """16 hex characters naming a paper's citing text and count ("" for a paper nobody cites)."""
    if not text and not count:
        return ""
    return hashlib.blake2b(f"{count}\0{text}".encode(), digest_size=8).hexdigest()


@dataclass
class DenseVectors:
    """Vectors to copy into the collection: paper id -> L2-normalised float32 row, with the model
    hash that says whether an existing collection's vectors are still comparable."""

    model_hash: str
    dim: int
    rows: dict[int, np.ndarray]


@dataclass
class SyncStats:
    """What a sync did (printed by ``citewise index --engine``)."""

    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    recreated: bool = False
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        written = self.inserted + self.updated
        rate = round(written / self.seconds, 1) if self.seconds else 0.0
        return {**self.__dict__, "seconds": round(self.seconds, 1), "papers_per_second": rate}


class MilvusEngine:
    """A Milvus collection as the prefetch's :class:`~citewise.indexer.engine.SearchEngine`."""

    name = "milvus"
    # Each search is a round trip that waits on Milvus: the prefetch sends its views in parallel.
    parallel_queries = True

    def __init__(self, client: Any, spec: EngineSpec) -> None:
        self.client = client
        self.spec = spec
        self.collection = spec.collection
        self.terms = f"{spec.collection}__terms"  # each term's document frequency, for feedback
        self._meta: dict[str, Any] | None = None
        self._cited: int | None = None  # papers with citers in the collection (None: not asked yet)
        # Citation counts of papers that searches returned (nonzero only): the prefetch's prior
        # asks for the counts of its candidates, which all came back from a search with theirs.
        self._counts: dict[int, int] = {}
        self.tokenizer = Tokenizer()  # the local index's: the impacts are keyed by its terms

    @classmethod
    def connect(cls, spec: EngineSpec, timeout: float = 10.0) -> MilvusEngine:
        return cls(_connect(spec, timeout), spec)

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """A client call whose Milvus error becomes one EngineError line (the server shows it)."""
        pm = _pymilvus()
        try:
            return fn(*args, **kwargs)
        except pm.exceptions.MilvusException as exc:
            raise EngineError(f"{self.spec}: {what} failed ({getattr(exc, 'message', exc)})") from exc

    # -- the collection ---------------------------------------------------------------------------
    def exists(self) -> bool:
        return bool(self._call("has_collection", self.client.has_collection, self.collection))

    def meta(self) -> dict[str, Any]:
        """What citewise recorded in the collection's description (schema version, dense model)."""
        if self._meta is None:
            desc = self._call("describe", self.client.describe_collection, self.collection)
            try:
                self._meta = json.loads(desc.get("description") or "{}")
            except ValueError:
                self._meta = {}
        return self._meta

    @property
    def has_dense(self) -> bool:
        return bool(self.meta().get("dim"))

    @property
    def schema_version(self) -> int:
        return int(self.meta().get("citewise") or 0)

    def check_schema(self) -> None:
        """Refuse to serve a collection of an older schema: its BM25 is Milvus's own, not the
        local index's impacts that queries are now made for."""
        if self.schema_version < SCHEMA_VERSION:
            raise EngineError(
                f"{self.spec}: written by an older citewise (collection schema {self.schema_version}, "
                f"this one needs {SCHEMA_VERSION}: the local index's BM25 impacts); rewrite it with "
                f"`citewise index --store STORE --engine {self.spec}` (the collection is rebuilt)"
            )

    @property
    def citing_counts(self) -> np.ndarray:
        """Whether the prior applies, in the local index's terms (``counts.any()``): one element,
        the number of papers of the collection that some paper cites."""
        if self._cited is None:
            self._cited = self._count("cited_by > 0") if self.schema_version >= 2 else 0
        return np.asarray([self._cited], dtype=np.int64)

    def citing_count(self, paper_ids: list[int]) -> np.ndarray:
        """Number of citing papers of each id (0 for one no search has returned)."""
        return np.asarray([self._counts.get(int(pid), 0) for pid in paper_ids], dtype=np.int64)

    def create(self, dense: DenseVectors | None, index: BM25Index) -> None:
        """The collection and its indexes (dense field and index only when ``dense`` is given),
        recording the BM25 statistics its impacts are written with (``index``'s)."""
        pm = _pymilvus()
        dt = pm.DataType
        meta: dict[str, Any] = {"citewise": SCHEMA_VERSION, "dim": dense.dim if dense else 0}
        meta["dense_model"] = dense.model_hash if dense else ""
        meta["bm25"] = _bm25_meta(index)
        schema = self.client.create_schema(auto_id=False, description=json.dumps(meta))
        schema.add_field("id", dt.INT64, is_primary=True)
        schema.add_field("hash", dt.VARCHAR, max_length=16)
        schema.add_field("chash", dt.VARCHAR, max_length=16)  # citing_hash: "" when nobody cites it
        schema.add_field("cited_by", dt.INT32)
        schema.add_field("impacts", dt.SPARSE_FLOAT_VECTOR)
        index_params = self.client.prepare_index_params()
        index_params.add_index("impacts", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
        if dense is not None:
            schema.add_field("dense", dt.FLOAT_VECTOR, dim=dense.dim)
            index_params.add_index("dense", index_type="AUTOINDEX", metric_type="COSINE")
        # Shards spread a cluster's inserts over data nodes; Milvus Lite has one and ignores this.
        shards = {"num_shards": self.spec.shards} if self.spec.shards else {}
        self._call(
            "create collection",
            self.client.create_collection,
            self.collection,
            schema=schema,
            index_params=index_params,
            **shards,
        )
        self._meta = meta
        self._cited = None

    def ready(self) -> None:
        """Load the collection if the server released it (a cluster restart), and touch it once:
        Milvus Lite reads a 110k-paper collection from disk on first use (~5 s), which must happen
        while the server starts, not in the first completion request."""
        if not self._has_terms():  # a sync stopped before its last step
            raise EngineError(
                f"{self.spec}: the collection's term statistics are missing (an interrupted sync); "
                f"finish it with `citewise index --store STORE --engine {self.spec}`"
            )
        for name in (self.collection, self.terms):
            state = self._call("load state", self.client.get_load_state, name)
            if "NotLoad" in str(state.get("state", "")):
                self._call("load", self.client.load_collection, name)
        self.search("citewise", 1)
        self.idf_of({"citewise"})

    def sample(self, n: int = 32) -> dict[int, str]:
        """Paper id -> content hash of some rows (which ones is up to Milvus): enough to tell
        whether a store is the one the collection was written from."""
        rows = self._call(
            "query", self.client.query, self.collection, filter="id >= 0", output_fields=["hash"], limit=n
        )
        return {int(r["id"]): r["hash"] for r in rows}

    def drop(self) -> None:
        if self.exists():
            self._call("drop collection", self.client.drop_collection, self.collection)
        if self._has_terms():
            self._call("drop collection", self.client.drop_collection, self.terms)
        self._meta = None
        self._cited = None
        self._counts.clear()

    def _has_terms(self) -> bool:
        return bool(self._call("has_collection", self.client.has_collection, self.terms))

    def count(self) -> int:
        if not self.exists():
            return 0
        return self._count("")

    def _count(self, where: str) -> int:
        rows = self._call(
            "count", self.client.query, self.collection, filter=where, output_fields=["count(*)"]
        )
        return int(rows[0]["count(*)"]) if rows else 0

    def close(self) -> None:
        """Close the client; for Milvus Lite also stop its server process, which frees the file for
        another process (the language server after ``citewise index``)."""
        self.client.close()
        if self.spec.kind == "milvus-lite":
            from milvus_lite.server_manager import server_manager_instance

            server_manager_instance.release_server(self.spec.uri)

    # -- search -----------------------------------------------------------------------------------
    def exclusion(self, excluded: Collection[int]) -> str | None:
        """A filter expression leaving out ``excluded`` paper ids (None when there are none)."""
        if not excluded:
            return None
        return "id not in [" + ",".join(str(int(i)) for i in sorted(excluded)) + "]"

    def search(
        self, text: str | Counter[str], k: int = 10, mask: str | None = None, dedupe: bool = False
    ) -> list[tuple[int, float]]:
        """Top-k (paper id, BM25 score) for a query text or weighted query terms (the local
        tokenizer's); ``mask`` is the filter :meth:`exclusion` made. Same contract, and the same
        scores, as the local index's ``search``; each hit's citation count is kept for the prior
        (:meth:`citing_count`)."""
        query = self._query(text, dedupe)
        if not query:
            return []
        return self._search([query], "impacts", k, mask, {"metric_type": "IP"})[0]

    def _query(self, text: str | Counter[str], dedupe: bool = False) -> dict[int, float]:
        return query_vector(text if isinstance(text, Counter) else Counter(self.tokenizer(text)), dedupe)

    def dense(self, vector: np.ndarray, k: int, exclusion: str | None = None) -> list[tuple[int, float]]:
        """Top-k (paper id, cosine) for one query vector."""
        if not self.has_dense:
            raise EngineError(f"{self.spec}: the collection holds no dense vectors")
        vec = np.asarray(vector, dtype=np.float32).reshape(-1).tolist()
        return self._search([vec], "dense", k, exclusion, {"metric_type": "COSINE"})[0]

    def hybrid(
        self, text: str, vector: np.ndarray, k: int, exclusion: str | None = None, rrf_k: int = 60
    ) -> list[tuple[int, float]]:
        """BM25 and dense fused by reciprocal rank inside Milvus, in one round trip."""
        pm = _pymilvus()
        vec = np.asarray(vector, dtype=np.float32).reshape(-1).tolist()
        expr = exclusion or ""
        reqs = [
            pm.AnnSearchRequest(
                data=[self._query(text)],
                anns_field="impacts",
                param={"metric_type": "IP"},
                limit=k,
                expr=expr,
            ),
            pm.AnnSearchRequest(
                data=[vec], anns_field="dense", param={"metric_type": "COSINE"}, limit=k, expr=expr
            ),
        ]
        hits = self._call(
            "hybrid search", self.client.hybrid_search, self.collection, reqs, pm.RRFRanker(rrf_k), limit=k
        )
        return [(int(h["id"]), float(h["distance"])) for h in hits[0]]

    def _search(
        self, data: list, field: str, k: int, exclusion: str | None, params: dict
    ) -> list[list[tuple[int, float]]]:
        counted = bool(self.citing_counts.any())
        hits = self._call(
            "search",
            self.client.search,
            self.collection,
            data=data,
            anns_field=field,
            limit=min(k, 16384),
            filter=exclusion or "",
            search_params=params,
            output_fields=["cited_by"] if counted else None,
        )
        if counted:
            self._remember_counts(hits)
        return [[(int(h["id"]), float(h["distance"])) for h in per_query] for per_query in hits]

    def _remember_counts(self, hits: Any) -> None:
        counts = self._counts
        for per_query in hits:
            for h in per_query:
                n = int(h["entity"].get("cited_by") or 0)
                if n:
                    counts[int(h["id"])] = n
                elif counts:
                    counts.pop(int(h["id"]), None)

    def expansion_terms(self, texts: list[str], n_terms: int = 20) -> Counter[str]:
        """Pseudo-relevance feedback as the local index does it (``bm25.feedback_terms``), with
        the document frequencies the sync wrote beside the collection (one round trip)."""
        return feedback_terms([Counter(self.tokenizer(t)) for t in texts], self.idf_of, n_terms)

    def idf_of(self, terms: set[str]) -> dict[str, float]:
        """The idf of each term, from the terms collection and the papers the impacts count."""
        if not terms:
            return {}
        keys = {t: term_id(t) for t in terms}
        rows = self._call(
            "query", self.client.query, self.terms, ids=sorted(set(keys.values())), output_fields=["df"]
        )
        df = {int(r["id"]): int(r["df"]) for r in rows}
        n = int((self.meta().get("bm25") or {}).get("papers") or 0)
        return {t: idf(n, df.get(k, 0)) for t, k in keys.items()}

    def _write_terms(self, index: BM25Index, batch: int = 20000) -> None:
        """Every term's document frequency in ``index`` (colliding term ids add up), upserted into
        the terms collection, which is created the first time: feedback weighs terms by them
        (:meth:`expansion_terms`). Upserted, not rewritten, so that editors searching a lab's
        collection meanwhile always find the statistics."""
        if not self._has_terms():
            self._create_terms()
        df: dict[int, int] = {}
        counts = np.diff(np.asarray(index.offsets)).tolist()
        for term, tid in index.vocab.items():
            key = term_id(term)
            df[key] = df.get(key, 0) + counts[tid]
        items = list(df.items())
        for i in range(0, len(items), batch):
            rows = [{"id": k, "df": n, "none": {}} for k, n in items[i : i + batch]]
            self._call("upsert", self.client.upsert, self.terms, rows)
        self._call("flush", self.client.flush, self.terms)

    def _create_terms(self) -> None:
        pm = _pymilvus()
        schema = self.client.create_schema(auto_id=False)
        schema.add_field("id", pm.DataType.INT64, is_primary=True)
        schema.add_field("df", pm.DataType.INT64)
        schema.add_field("none", pm.DataType.SPARSE_FLOAT_VECTOR)  # Milvus needs a vector field
        params = self.client.prepare_index_params()
        params.add_index("none", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
        self._call(
            "create collection", self.client.create_collection, self.terms, schema=schema, index_params=params
        )

    # -- writing ----------------------------------------------------------------------------------
    def present(self) -> dict[int, str]:
        """Paper id -> content hash and citing hash of every row, read in pages (the resume's
        starting point)."""
        it = self._call(
            "query",
            self.client.query_iterator,
            self.collection,
            batch_size=16384,
            output_fields=["hash", "chash"],
        )
        out: dict[int, str] = {}
        try:
            while rows := self._call("query", it.next):
                out.update((int(r["id"]), r["hash"] + r["chash"]) for r in rows)
        finally:
            it.close()
        return out

    def _outdated(self, dense: DenseVectors | None, index: BM25Index) -> str:
        """Why the collection must be rebuilt before a sync ("" when it need not)."""
        if not self.exists():
            return ""
        if self.schema_version < SCHEMA_VERSION:
            return (
                f"collection schema {self.schema_version} (written by an older citewise, with Milvus's "
                f"own BM25); rebuilding it with schema {SCHEMA_VERSION}"
            )
        if self.meta().get("dense_model", "") != (dense.model_hash if dense else ""):
            return "built for another dense model (or none); rebuilding it"
        return _stats_drift(self.meta().get("bm25") or {}, index)

    def sync(
        self,
        store: Store,
        dense: DenseVectors | None = None,
        progress: Progress | None = None,
        batch: int = 1000,
        index: BM25Index | None = None,
    ) -> SyncStats:
        """Bring the collection up to the store: insert new papers, upsert changed ones (their own
        text, or their citing text and count), delete gone ones, skip the rest (so an interrupted
        sync resumes where it stopped). Impacts are ``index``'s (the store's BM25 index, loaded or
        built when not given). A collection of an older schema, whose dense model differs from
        ``dense`` (vectors of two models do not mix), or whose BM25 statistics the store has
        outgrown (:func:`_stats_drift`) is rebuilt."""
        t0 = time.perf_counter()
        stats = SyncStats()
        index = index if index is not None else bm25_files.load_or_build(store)
        why = self._outdated(dense, index)
        if why:
            log.warning("%s: %s", self.spec, why)
            self.drop()
            stats.recreated = True
        cited = citations.expansions(store)  # {} for a store without citation data
        total, done, seen = store.count(), 0, set()
        if not self.exists():
            self.create(dense, index)
        have = self.present()
        for rows in _store_batches(store, batch):
            new: list[dict] = []
            changed: list[dict] = []
            todo = []
            for row in rows:
                seen.add(row[0])
                exp = cited.get(row[0])
                text, count = (exp.text, len(exp.citing)) if exp is not None else ("", 0)
                if have.get(row[0]) == row[4][:16] + citing_hash(text, count):
                    stats.unchanged += 1
                else:
                    todo.append((row, text, count))
            for made in _rows(todo, index, dense):
                (changed if made["id"] in have else new).append(made)
            if new:
                self._call("insert", self.client.insert, self.collection, new)
            if changed:
                self._call("upsert", self.client.upsert, self.collection, changed)
            stats.inserted += len(new)
            stats.updated += len(changed)
            done += len(rows)
            if progress is not None:
                progress(done, total)
        gone = [pid for pid in have if pid not in seen]
        for i in range(0, len(gone), 10000):
            self._call("delete", self.client.delete, self.collection, ids=gone[i : i + 10000])
        stats.deleted = len(gone)
        self._call("flush", self.client.flush, self.collection)
        if stats.inserted or stats.updated or stats.deleted or not self._has_terms():
            self._write_terms(index)
        self._cited = None  # new citation data may have come
        stats.seconds = time.perf_counter() - t0
        return stats


def _rows(todo: list[tuple[tuple, str, int]], index: BM25Index, dense: DenseVectors | None) -> list[dict]:
    """Collection rows for store rows (id, title, abstract, keywords, content hash) with their
    citing text and count: the impacts as ``index`` scores the paper (``doc_impacts``)."""
    if not todo:
        return []
    w_citing = index.params.w_citing
    docs = [(r[0], r[1], r[2], r[3], text if w_citing else "", count) for r, text, count in todo]
    impacts = dict(index.doc_impacts(docs))
    out = []
    for (pid, _title, _abstract, _keywords, chash), text, count in todo:
        row = {
            "id": pid,
            "hash": chash[:16],
            "chash": citing_hash(text, count),
            "cited_by": count,
            "impacts": sparse(impacts.get(pid, {})),
        }
        if dense is not None:
            row["dense"] = _vector(dense, pid)
        out.append(row)
    return out


def _bm25_meta(index: BM25Index) -> dict[str, Any]:
    """The statistics a collection's impacts are written with (its description keeps them)."""
    return {"papers": index.size, "params": index.params.__dict__}


def _stats_drift(meta: dict[str, Any], index: BM25Index) -> str:
    """Why the collection's impacts no longer match ``index`` ("" while they do): other BM25
    parameters, or a store grown or shrunk past the share a local delta may reach
    (``bm25_files.max_delta``), after which the local index is rebuilt too."""
    if meta.get("params") != index.params.__dict__:
        return "written with other BM25 parameters; rebuilding it"
    then = int(meta.get("papers") or 0)
    if abs(index.size - then) > bm25_files.max_delta(then):
        return f"written when the store had {then} papers, it has {index.size}: rebuilding it with today's BM25 statistics"
    return ""


def _vector(dense: DenseVectors, pid: int) -> list[float]:
    vec = dense.rows.get(pid)
    if vec is None:
        raise EngineError(
            f"paper {pid} has no dense vector: run `citewise index` to embed the store before "
            "copying it to Milvus (or copy BM25 only)"
        )
    return vec.tolist()


def _store_batches(store: Store, batch: int) -> Iterator[list[tuple[int, str, str, str, str]]]:
    """The store's search fields in id order, ``batch`` papers at a time (keyset paging)."""
    last = -1
    while True:
        rows = store.conn.execute(
            "SELECT id, title, abstract, keywords, content_hash FROM papers WHERE id > ? ORDER BY id LIMIT ?",
            (last, batch),
        ).fetchall()
        if not rows:
            return
        yield [tuple(r) for r in rows]
        last = rows[-1][0]


class MilvusDense:
    """A Milvus collection's dense field as the prefetch's DenseSource: the query is encoded here
    (the dense encoder runs where the editor is) and only the vector travels."""

    def __init__(self, engine: MilvusEngine, encoder: Any) -> None:
        self.engine = engine
        self.encoder = encoder

    def search_query(self, query: Any, k: int) -> list[tuple[int, float]]:
        return self.engine.dense(self.encoder.encode_query(query), k)


def open_engine(spec: str | EngineSpec, store: Store | None = None, **kwargs: Any) -> Any:
    """A Milvus engine for a non-local spec (pymilvus is imported on first use, so citewise runs
    without it); ``store`` is unused for Milvus and kept for symmetry with the local engine."""
    parsed = spec if isinstance(spec, EngineSpec) else parse_engine(spec)
    if parsed.is_local:
        raise EngineError(
            "the local engine is built from the store (citewise.indexer.bm25_files.load_or_build)"
        )
    return MilvusEngine.connect(parsed, **kwargs)
