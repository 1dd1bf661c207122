"""Milvus as the search engine: full-text BM25, optional dense vectors, hybrid search.

One collection per corpus: the store's paper id (INT64 primary key, so the SQLite store turns a
hit into a paper), a 16-character content hash (so a resumed or repeated ``citewise index``
skips what is already there), the search text (title, abstract, keywords: the fields the local
BM25 index weighs equally) analysed with Milvus's English analyzer, the sparse vector a BM25
Function derives from it (SPARSE_INVERTED_INDEX, BM25 metric, k1 1.2 and b 0.75 as locally), and
a dense vector (AUTOINDEX, cosine) only when the store has a dense index to copy.

Schema 2 (issue 28) carries what the local engine ranks with besides the text: a second analysed
field, ``citing`` (the paper's own text followed by the sentences and titles of the papers citing
it, ``citations.expansions``), with its own BM25 Function and sparse vector, searched instead of
``text`` when the collection holds citation data (:meth:`MilvusEngine.search` says why the own
text is in it); the number of citing papers (``cited_by``, the count prior); and a hash of both
(``chash``) so that new citation data rewrites exactly the papers it changes.

Why Milvus Lite 2.5.1 and not 3.x: 2.5.1 runs the real Milvus binary (same analyzer, BM25 and
filters as a cluster); 3.x is a pure-Python reimplementation measured 100x slower with negative
BM25 scores and filters ignored (issue 19). pymilvus is imported lazily: citewise runs without it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
import warnings
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from . import citations
from .bm25 import STOPWORDS, BM25Params
from .engine import EngineError, EngineSpec, Progress

if TYPE_CHECKING:
    from .store import Store

log = logging.getLogger(__name__)

MAX_TEXT_BYTES = 60000  # VARCHAR max_length is 65535 bytes; a longer abstract is cut
# 1: text + sparse (+ dense). 2: the citing field, its sparse vector, cited_by and chash (issue 28).
SCHEMA_VERSION = 2
# With citation data a query searches only the ``citing`` field, which holds the paper's own text
# followed by its citing text. Why not the citing text alone, added to the own text's score (a
# weighted sum of two BM25s, as first built): Milvus weighs a word of a field by that field's
# document frequency, so a word common in abstracts but in few citing texts took a huge weight in
# the citing field, and on a store with few cited papers (ACM-CR with 967) R@10 fell to 0.00;
# with the own text in the field, its document frequencies are those of the local BM25F's
# (a word of either field). Measured in docs/scaling.md (ACL dev and ACM-CR dev within 0.03).
BM25_K1, BM25_B = BM25Params().k1, BM25Params().b
# Words as Milvus's standard tokenizer sees them (letters of any script, digits), not folded to
# ASCII as the local tokenizer does: the analyzer stores "schütze", so the query must say it too.
_WORD_RE = re.compile(r"[^\W_]+")
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


def query_text(terms: Counter[str], dedupe: bool = False) -> str:
    """Weighted query words as text, each repeated by its weight: Milvus weighs a query word by its
    frequency in the query, like the local index. Fractional weights (a word outside the
    placeholder's own segment counts 0.5) are scaled up first, up to 4x, keeping their ratios."""
    weights = {w: (1.0 if dedupe else float(n)) for w, n in terms.items() if n > 0}
    if not weights:
        return ""
    scale = min(4.0, 1.0 / min(min(weights.values()), 1.0))
    return " ".join(" ".join([w] * max(1, round(n * scale))) for w, n in weights.items())


def search_text(title: str, abstract: str, keywords: str) -> str:
    """The analysed text of a paper: its three BM25 fields, cut to what a VARCHAR holds."""
    return _fit("\n".join(t for t in (title, abstract, keywords) if t))


def citing_hash(text: str, count: int) -> str:
    """16 hex characters naming a paper's citing text and count ("" for a paper nobody cites)."""
    if not text and not count:
        return ""
    return hashlib.blake2b(f"{count}\0{text}".encode(), digest_size=8).hexdigest()


def _fit(text: str) -> str:
    """``text`` cut to what a VARCHAR holds (a paper cited hundreds of times can exceed it)."""
    raw = text.encode("utf-8")
    if len(raw) > MAX_TEXT_BYTES:
        text = raw[:MAX_TEXT_BYTES].decode("utf-8", "ignore")
    return text


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
        self._meta: dict[str, Any] | None = None
        self._cited: int | None = None  # papers with citers in the collection (None: not asked yet)
        # Citation counts of papers that searches returned (nonzero only): the prefetch's prior
        # asks for the counts of its candidates, which all came back from a search with theirs.
        self._counts: dict[int, int] = {}

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
        """Refuse to serve a collection of an older schema: it lacks the citing field and the
        citation counts, so a store with citation data would rank as if it had none."""
        if self.schema_version < SCHEMA_VERSION:
            raise EngineError(
                f"{self.spec}: written by an older citewise (collection schema {self.schema_version}, "
                f"this one needs {SCHEMA_VERSION}: the citing field and citation counts); rewrite it with "
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

    def create(self, dense: DenseVectors | None) -> None:
        """The collection and its indexes (dense field and index only when ``dense`` is given)."""
        pm = _pymilvus()
        dt = pm.DataType
        meta = {"citewise": SCHEMA_VERSION, "dim": dense.dim if dense else 0}
        meta["dense_model"] = dense.model_hash if dense else ""
        schema = self.client.create_schema(auto_id=False, description=json.dumps(meta))
        schema.add_field("id", dt.INT64, is_primary=True)
        schema.add_field("hash", dt.VARCHAR, max_length=16)
        schema.add_field("chash", dt.VARCHAR, max_length=16)  # citing_hash: "" when nobody cites it
        schema.add_field("cited_by", dt.INT32)
        index = self.client.prepare_index_params()
        # Two BM25 fields: the own text (stores without citation data), and the own text followed
        # by the citing text (the local BM25F's fields, with the document frequencies of both).
        for text, sparse in (("text", "sparse"), ("citing", "citing_sparse")):
            schema.add_field(
                text, dt.VARCHAR, max_length=65535, enable_analyzer=True, analyzer_params={"type": "english"}
            )
            schema.add_field(sparse, dt.SPARSE_FLOAT_VECTOR)
            schema.add_function(
                pm.Function(
                    name=f"{text}_bm25",
                    function_type=pm.FunctionType.BM25,
                    input_field_names=[text],
                    output_field_names=[sparse],
                )
            )
            params = {"bm25_k1": BM25_K1, "bm25_b": BM25_B}
            index.add_index(sparse, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params=params)
        if dense is not None:
            schema.add_field("dense", dt.FLOAT_VECTOR, dim=dense.dim)
            index.add_index("dense", index_type="AUTOINDEX", metric_type="COSINE")
        # Shards spread a cluster's inserts over data nodes; Milvus Lite has one and ignores this.
        shards = {"num_shards": self.spec.shards} if self.spec.shards else {}
        self._call(
            "create collection",
            self.client.create_collection,
            self.collection,
            schema=schema,
            index_params=index,
            **shards,
        )
        self._meta = meta
        self._cited = None

    def ready(self) -> None:
        """Load the collection if the server released it (a cluster restart), and touch it once:
        Milvus Lite reads a 110k-paper collection from disk on first use (~5 s), which must happen
        while the server starts, not in the first completion request."""
        state = self._call("load state", self.client.get_load_state, self.collection)
        if "NotLoad" in str(state.get("state", "")):
            self._call("load", self.client.load_collection, self.collection)
        self.search("citewise", 1)

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
        self._meta = None
        self._cited = None
        self._counts.clear()

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
        """Top-k (paper id, BM25 score) for a query text or weighted query words; ``mask`` is the
        filter :meth:`exclusion` made. Same contract as the local index's ``search``.

        With citation data the ``citing`` field (the own text and the citing text) is searched, and
        each hit's citation count kept for the prior (:meth:`citing_count`)."""
        query = text if isinstance(text, str) else query_text(text, dedupe)
        if not query.strip():
            return []
        field = "citing_sparse" if self.citing_counts.any() else "sparse"
        return self._search([query], field, k, mask, {"metric_type": "BM25"})[0]

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
                data=[text], anns_field="sparse", param={"metric_type": "BM25"}, limit=k, expr=expr
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

    @staticmethod
    def tokenizer(text: str) -> list[str]:
        """The content words of a text, unstemmed: Milvus's English analyzer stems them itself
        (sending our Porter stems would stem twice)."""
        return [w for w in _WORD_RE.findall(text.lower()) if w not in STOPWORDS and len(w) < 40]

    def expansion_terms(self, texts: list[str], n_terms: int = 20) -> Counter[str]:
        """Pseudo-relevance feedback without the collection's document frequencies (Milvus does not
        expose them): a word scores its length-normalised frequency in each feedback text, times
        the share of feedback texts that hold it, so words the top papers share come first."""
        weights: Counter[str] = Counter()
        spread: Counter[str] = Counter()
        for text in texts:
            tf = Counter(self.tokenizer(text))
            length = sum(tf.values()) or 1
            for word, count in tf.items():
                weights[word] += count / length
                spread[word] += 1
        n = max(1, len(texts))
        scored = {w: weights[w] * spread[w] / n for w in weights if spread[w] > 1 or n == 1}
        return Counter({w: 1 for w in sorted(scored, key=lambda w: -scored[w])[:n_terms]})

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

    def _outdated(self, dense: DenseVectors | None) -> str:
        """Why the collection must be rebuilt before a sync ("" when it need not)."""
        if not self.exists():
            return ""
        if self.schema_version < SCHEMA_VERSION:
            return (
                f"collection schema {self.schema_version} (written by an older citewise, without the "
                f"citing field and citation counts); rebuilding it with schema {SCHEMA_VERSION}"
            )
        if self.meta().get("dense_model", "") != (dense.model_hash if dense else ""):
            return "built for another dense model (or none); rebuilding it"
        return ""

    def sync(
        self,
        store: Store,
        dense: DenseVectors | None = None,
        progress: Progress | None = None,
        batch: int = 1000,
    ) -> SyncStats:
        """Bring the collection up to the store: insert new papers, upsert changed ones (their own
        text, or their citing text and count), delete gone ones, skip the rest (so an interrupted
        sync resumes where it stopped). A collection of an older schema, or whose dense model
        differs from ``dense``, is rebuilt: vectors of two models do not mix."""
        t0 = time.perf_counter()
        stats = SyncStats()
        why = self._outdated(dense)
        if why:
            log.warning("%s: %s", self.spec, why)
            self.drop()
            stats.recreated = True
        cited = citations.expansions(store)  # {} for a store without citation data
        total, done, seen = store.count(), 0, set()
        if not self.exists():
            self.create(dense)
        have = self.present()
        for rows in _store_batches(store, batch):
            new, changed = [], []
            for row in rows:
                seen.add(row[0])
                made = _row(row, cited.get(row[0]), dense)
                if have.get(row[0]) == made["hash"] + made["chash"]:
                    stats.unchanged += 1
                else:
                    (changed if row[0] in have else new).append(made)
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
        self._cited = None  # new citation data may have come
        stats.seconds = time.perf_counter() - t0
        return stats


def _row(paper: tuple, exp: citations.Expansion | None, dense: DenseVectors | None) -> dict[str, Any]:
    """A collection row for a store row (id, title, abstract, keywords, content hash)."""
    pid, title, abstract, keywords, chash = paper
    text, count = (exp.text, len(exp.citing)) if exp is not None else ("", 0)
    row = {
        "id": pid,
        "hash": chash[:16],
        "chash": citing_hash(text, count),
        "cited_by": count,
        "text": search_text(title, abstract, keywords),
        "citing": _fit(search_text(title, abstract, keywords) + "\n" + text),
    }
    if dense is not None:
        row["dense"] = _vector(dense, pid)
    return row


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
