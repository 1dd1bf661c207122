"""A dense list of how each paper is cited: its citing sentences and citing titles, embedded by the
bi-encoder's query side, one mean vector a cited paper, fused into the prefetch.

Why: where the store knows how its papers are cited, BM25 reads the citing sentences, but only by
their words; the dense paper list, which reads title and abstract, was left out there (on the ACL
dev split it lowered MRR: a cited ACL paper often has only its title). A citing sentence is what
the sentence being written is: another author saying what the paper is cited for. So the
bi-encoder's query encoder, trained to map a citing sentence near the paper it cites, embeds the
store's citing texts as it embeds the query, and a paper's vector is the mean of its citers'
(issue 26; docs/citation-expansion.md). The texts are the BM25 expansion field's
(:func:`citewise.indexer.citations.expansions`), so both read the same knowledge.

Files, beside the store in ``<store>.citing/``: ``texts.*``, every distinct citing text's vector
by the hash of the text (:class:`~citewise.indexer.vector_cache.VectorCache`: appended as they are
embedded, so a rebuild embeds only new texts and a killed build keeps what it embedded), and
``rows.i64`` / ``emb.f32`` / ``meta.json``, the papers' mean vectors, each written under a
temporary name and renamed into place, ``meta.json`` (with a digest of both) last.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from citewise.indexer import citations
from citewise.indexer.index_files import remove_dead_temporaries, replace_file
from citewise.indexer.store import Store
from citewise.indexer.vector_cache import VectorCache, text_key

from . import citation_prior

log = logging.getLogger(__name__)

FORMAT = "citewise-citing/1"
BATCH = 256  # texts embedded between appends: what a killed build loses at most
# How many of the query's BM25 candidates tell whether its neighbourhood is one the store's
# citation knowledge covers (:meth:`CitingVectors.speaks_for`): the reranker's own depth.
NEIGHBOURHOOD = 20
Progress = Callable[[int, int], None]


def folder_of(store: Store) -> Path:
    """``<store>.citing/``, beside the store like its ``.bm25`` and ``.dense`` folders."""
    return store.path.with_name(store.path.name + ".citing")


@dataclass
class CitingVectors:
    """The papers' mean citing-text vectors, searched by a query's bi-encoder vector."""

    rows: np.ndarray  # (n,) paper ids
    vectors: np.ndarray  # (n, dim) float32, L2-normalised
    encoder: Any  # the bi-encoder (``encode_query``)

    def __len__(self) -> int:
        return len(self.rows)

    @cached_property
    def cited(self) -> frozenset[int]:
        return frozenset(self.rows.tolist())

    def speaks_for(self, neighbours: list[int], store_size: int) -> bool:
        """Whether the list may vote for a query whose BM25 neighbourhood (its first
        :data:`NEIGHBOURHOOD` papers by words) is ``neighbours``: only where cited papers are at
        least as common there as in the store at large. The list ranks cited papers only, so a
        sentence about a part of the store that nobody's citations cover (another field, on a
        store whose citation files cover one) got weight-2 votes for whatever cited paper was
        nearest: on ACM-CR dev sentences ranked in a store of ACM-CR and the ACL Anthology whose
        citation files are ACL's, R@10 0.482 without the list and 0.460 with it. An empty
        neighbourhood (no word of the query indexed) leaves the list to speak: meaning is all
        there is then."""
        if not neighbours or store_size <= 0:
            return True
        share = sum(p in self.cited for p in neighbours) / len(neighbours)
        return share >= len(self.rows) / store_size

    def search_query(self, query, k: int) -> list[tuple[int, float]]:
        """The ``k`` papers whose citers wrote most like the query (paper id, cosine)."""
        if not len(self.rows) or k <= 0:
            return []
        sims = self.vectors @ self.encoder.encode_query(query).astype(np.float32)
        k = min(k, len(sims))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.lexsort((self.rows[top], -sims[top]))]  # ties by paper id: one order every run
        return [(int(self.rows[i]), float(sims[i])) for i in top]


# -- the embedding cache: every distinct citing text's vector, appended -----------------------------
def text_cache(store: Store, encoder) -> VectorCache:
    """Every distinct citing text's vector, by :func:`text_key` (``texts.*`` in the folder)."""
    return VectorCache(folder_of(store), "texts", int(encoder.dim), encoder.model_hash)


def _embed_missing(
    cache: VectorCache, encoder, texts: dict[int, str], progress: Progress | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """Embed the texts the cache lacks, appending each batch; returns the whole cache and how many
    texts were embedded now."""
    keys, vecs = cache.read()
    have = set(keys.tolist())
    todo = [k for k in texts if k not in have]
    query_len = int(getattr(encoder, "query_len", 64))
    for start in range(0, len(todo), BATCH):
        chunk = todo[start : start + BATCH]
        on_batch = None if progress is None else _batch_reporter(progress, start, len(todo))
        new = encoder.encode_texts([" ".join(texts[k].split()) for k in chunk], query_len, on_batch)
        cache.append(chunk, new)
        if progress is not None:
            progress(start + len(chunk), len(todo))
    return (*cache.read(), len(todo)) if todo else (keys, vecs, 0)


def _batch_reporter(progress: Progress, start: int, total: int) -> Callable[[int], None]:
    """``progress`` told of each encoder batch (32 texts) from ``start`` on: an append (256 texts)
    is several seconds of the bi-encoder on two cores, too long between two reports."""
    done = start

    def on_batch(n: int) -> None:
        nonlocal done
        done += n
        progress(min(done, total), total)

    return on_batch


def paper_means(
    expansions: dict[int, list[int]], keys: np.ndarray, vecs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each paper's mean of its citing texts' vectors (``expansions``: paper id -> text keys),
    L2-normalised; papers none of whose texts has a vector are left out."""
    where = {int(k): i for i, k in enumerate(keys)}
    pids, means = [], []
    for pid in sorted(expansions):
        idx = [where[k] for k in expansions[pid] if k in where]
        if idx:
            mean = vecs[idx].mean(axis=0)
            norm = float(np.linalg.norm(mean))
            if norm > 0:
                pids.append(pid)
                means.append(mean / norm)
    dim = vecs.shape[1]
    return np.asarray(pids, dtype=np.int64), np.asarray(means, dtype=np.float32).reshape(len(pids), dim)


# -- build and load --------------------------------------------------------------------------------
def build(store: Store, encoder, progress: Progress | None = None) -> dict:
    """Embed the store's citing texts not embedded yet and write every cited paper's mean vector.
    Returns a summary (papers, texts, newly embedded texts), or why it was skipped
    (``citation_prior.MAX_CITED_AS``)."""
    folder = folder_of(store)
    folder.mkdir(exist_ok=True)
    remove_dead_temporaries(folder)  # of a build killed before renaming its files
    cache = text_cache(store, encoder)
    generation = store.generation
    texts: dict[int, str] = {}
    per_paper: dict[int, list[int]] = {}
    for pid, exp in citations.expansions(store).items():
        own = {text_key(t): t for t in exp.texts if t.strip()}
        texts.update(own)
        if own:
            per_paper[pid] = list(own)
    if len(per_paper) > citation_prior.MAX_CITED_AS:
        for name in ("rows.i64", "emb.f32", "meta.json"):
            (folder / name).unlink(missing_ok=True)
        cap = citation_prior.MAX_CITED_AS
        return {"skipped": f"{len(per_paper):,} cited papers, more than the {cap:,} the list holds"}
    keys, vecs, embedded = _embed_missing(cache, encoder, texts, progress)
    rows, means = paper_means(per_paper, keys, vecs)
    for name, data in (("rows.i64", rows), ("emb.f32", means)):
        tmp = folder / f"{name}.tmp{os.getpid()}"
        data.tofile(tmp)
        replace_file(tmp, folder / name)
    meta = {
        "format": FORMAT,
        "model_hash": encoder.model_hash,
        "dim": int(encoder.dim),
        "papers": len(rows),
        "texts": len(texts),
        "store_generation": generation,
        "digest": _digest(rows, means),
    }
    tmp = folder / f"meta.json.tmp{os.getpid()}"
    tmp.write_text(json.dumps(meta, indent=2) + "\n")
    replace_file(tmp, folder / "meta.json")
    return {"papers": len(rows), "texts": len(texts), "embedded": embedded}


def _digest(rows: np.ndarray, vectors: np.ndarray) -> str:
    """The papers' ids and vectors' identity: a reader that finds the files of one build and the
    meta of another (a build replacing them meanwhile) does not serve the mix."""
    h = hashlib.blake2b(digest_size=16)
    h.update(np.ascontiguousarray(rows, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    return h.hexdigest()


def read_meta(store: Store) -> dict:
    """The store's citing vectors' ``meta.json`` ({} when there is none)."""
    return _meta(folder_of(store))


def _meta(folder: Path) -> dict:
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def is_current(store: Store, model_hash: str) -> bool:
    """Whether the store's citing vectors were made by this model at the store's generation."""
    meta = _meta(folder_of(store))
    return (
        meta.get("format") == FORMAT
        and "digest" in meta
        and meta.get("model_hash") == model_hash
        and meta.get("store_generation") == store.generation
    )


def load(store: Store, encoder) -> CitingVectors | None:
    """The store's citing vectors for ``encoder``, or None: none built, another model's, or files
    that do not match their meta (a build replacing them meanwhile; the next refresh reads them).
    A store changed since they were built is still served (its papers' ids do not change), and
    the next ``citewise index`` or reindex brings them up to date."""
    folder = folder_of(store)
    meta = _meta(folder)
    if meta.get("format") != FORMAT or meta.get("model_hash") != encoder.model_hash:
        return None
    n, dim = int(meta.get("papers", -1)), int(meta.get("dim", 0))
    try:
        rows = np.fromfile(folder / "rows.i64", dtype=np.int64)
        vecs = np.fromfile(folder / "emb.f32", dtype=np.float32)
    except OSError:
        return None
    if (
        n < 0
        or dim <= 0
        or len(rows) != n
        or vecs.size != n * dim
        or meta.get("digest") != _digest(rows, vecs)
    ):
        log.info("citing vectors of %s do not match their meta: not used until rebuilt", store.path)
        return None
    return CitingVectors(rows, vecs.reshape(n, dim), encoder)


_ENCODER: list = []  # the shipped bi-encoder, loaded once per process (the server rebuilds recommenders)
_ENCODER_LOCK = threading.Lock()


def query_encoder():
    """The bi-encoder whose query side embeds both the citing texts and the query: the shipped
    ``models/dense`` (None when it is not installed). Its manifest's ``fuse_weight`` is the list's
    RRF weight: the same encoder's list as the dense paper list, on the same scale."""
    with _ENCODER_LOCK:
        if not _ENCODER:
            from .biencoder_onnx import BiEncoder
            from .dense_index import _shipped, verify_model

            folder = _shipped("dense")
            if not (folder / "manifest.json").exists():
                _ENCODER.append(None)
            else:
                verify_model(folder)
                _ENCODER.append(BiEncoder(folder))
        return _ENCODER[0]


def fuse_weight(encoder) -> float:
    """The list's RRF weight among the prefetch's lists (the bi-encoder manifest's, else 1)."""
    return float((getattr(encoder, "manifest", None) or {}).get("fuse_weight", 1.0))


def open_for(store: Store) -> CitingVectors | None:
    """The store's citing vectors for serving, or None (none built, no bi-encoder installed, or
    files that cannot be used: never an error on the way to an answer)."""
    if not (folder_of(store) / "meta.json").exists():
        return None
    try:
        encoder = query_encoder()
        return None if encoder is None else load(store, encoder)
    except Exception as exc:  # a damaged model or file must not stop BM25 from serving
        log.info("citing vectors not used: %s", exc)
        return None


def build_for(store: Store, progress: Progress | None = None, knows: bool | None = None) -> dict | None:
    """What ``citewise index`` and the server's reindex call once the BM25 index is up to date:
    where the store knows how its papers are cited (``knows``: the loaded BM25 index's
    ``citation_prior.knows_citations``; by default the saved index's counts), embed what is new;
    elsewhere remove vectors left from when it did. None when nothing was done (no citations, up
    to date, no bi-encoder)."""
    folder = folder_of(store)
    if knows is None:
        knows = citation_prior.store_knows_citations(store)
    if not knows:
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        return None
    encoder = query_encoder()
    if encoder is None or is_current(store, encoder.model_hash):
        return None
    return build(store, encoder, progress)
