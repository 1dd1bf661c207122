"""A static paper encoder distilled from the bi-encoder (issue 16, embedding throughput).

Why: the fine-tuned MiniLM bi-encoder embeds about 50-125 papers/s on two cores, so a 110k-paper
store takes half an hour. Queries are one at a time (7 ms), papers are the bulk. This encoder keeps
the bi-encoder for queries and replaces it for papers by a weighted bag of word pieces trained to
land on the bi-encoder's own paper vectors (:mod:`training.static_distill`): one table
lookup and a sum per paper, numpy + tokenizers only.

The model folder holds ``table.int8.npy`` (vocabulary × dim, one scale per row folded into its weight), ``weights.f32.npy`` (one weight per
word piece), ``tokenizer.json`` and a manifest whose ``"query_model"`` names the bi-encoder folder
(relative to this one) that embeds queries.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from itertools import chain
from pathlib import Path

import numpy as np

from citewise.indexer.records import PaperRecord

from .biencoder_onnx import BiEncoder, OnBatch, manifest_hash, paper_text
from .query import ContextQuery


def bag_vectors(
    seqs: Sequence[Sequence[int]], table: np.ndarray, weights: np.ndarray, dim: int, batch: int = 256
) -> np.ndarray:
    """L2-normalised weighted sums of word-piece rows: the whole model (training computes the same
    with torch). Batched so the gathered rows stay a few tens of MB."""
    out = np.zeros((len(seqs), dim), dtype=np.float32)
    for b in range(0, len(seqs), batch):
        part = seqs[b : b + batch]
        lens = np.fromiter((len(s) for s in part), np.int64, len(part))
        if not lens.sum():
            continue
        flat = np.fromiter(chain.from_iterable(part), np.int64, int(lens.sum()))
        rows = table[flat].astype(np.float32)
        rows *= weights[flat][:, None]
        starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
        full = lens > 0
        out[b : b + len(part)][full] = np.add.reduceat(rows, starts[full], axis=0)
    norm = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norm, 1e-9)


class StaticEncoder:
    """Papers by the distilled bag of word pieces, queries by the bi-encoder it was distilled from."""

    def __init__(self, model_dir: str | os.PathLike[str], threads: int = 2) -> None:
        from tokenizers import Tokenizer

        self.dir = Path(model_dir)
        self.manifest = json.loads((self.dir / "manifest.json").read_text())
        self.doc_len = int(self.manifest.get("doc_len", 128))
        self.table = np.load(self.dir / "table.int8.npy")
        self.weights = np.load(self.dir / "weights.f32.npy").astype(np.float32)  # weight × row scale
        self.dim = int(self.table.shape[1])
        self.tok = Tokenizer.from_file(str(self.dir / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(self.doc_len)
        self._query_dir = (self.dir / self.manifest["query_model"]).resolve()
        self._threads = threads
        self._queries: BiEncoder | None = None
        self._lock = threading.Lock()
        query_manifest = json.loads((self._query_dir / "manifest.json").read_text())
        self._hash = manifest_hash(self.manifest, extra=manifest_hash(query_manifest))

    @property
    def queries(self) -> BiEncoder:
        """The bi-encoder that embeds queries, loaded on first use: ``citewise index`` embeds
        papers only, and its ONNX session is ~45 MB of the index run's peak memory for nothing."""
        with self._lock:
            if self._queries is None:
                self._queries = BiEncoder(self._query_dir, threads=self._threads)
            return self._queries

    @property
    def model_hash(self) -> str:
        """Changes with the table, the weights, the tokenizer or the query model (its manifest,
        which :meth:`BiEncoder.model_hash` reads too)."""
        return self._hash

    @property
    def teacher(self) -> BiEncoder:
        """The bi-encoder these paper vectors approximate (it embeds the queries): what
        :mod:`citewise.models.teacher_rescore` re-scores a fused head with."""
        return self.queries

    def encode_texts(self, texts: Sequence[str], on_batch: OnBatch | None = None) -> np.ndarray:
        """Vectors (n, dim); ``on_batch(n)`` once the ``n`` texts are done (thousands a second:
        one report a call is often enough for a progress bar)."""
        seqs = [e.ids for e in self.tok.encode_batch(list(texts))]
        out = bag_vectors(seqs, self.table, self.weights, self.dim)
        if on_batch is not None:
            on_batch(len(seqs))
        return out

    def encode_papers(self, papers: Sequence[PaperRecord], on_batch: OnBatch | None = None) -> np.ndarray:
        """L2-normalised float32 vectors (n, dim) of papers' title + abstract."""
        return self.encode_texts([paper_text(p.title, p.abstract) for p in papers], on_batch)

    def encode_queries(self, queries: Sequence[ContextQuery]) -> np.ndarray:
        return self.queries.encode_queries(queries)

    def encode_query(self, q: ContextQuery) -> np.ndarray:
        return self.queries.encode_query(q)
