"""The static bag of word pieces with attention weights from their context (issue 26, attempt 2).

Why: the static model (:mod:`citewise.models.static_encoder`) gives each word piece one weight,
whatever the paper says around it. This encoder keeps its rows and weights and multiplies each
piece's weight by ``exp(s)``, where ``s`` comes from one small transformer layer over the paper's
pieces (HAtten's attention pooling, paper 004, over the distilled word vectors), trained to land on
the bi-encoder's paper vectors (:mod:`training.hatten_reweight`). Queries stay with the bi-encoder.

The folder holds ``scores.int8.onnx`` (embedded pieces + mask -> one score per piece),
``embeddings.npy`` (the pieces' input vectors, float16) and a manifest naming the static model
(``"bag_model"``) whose rows, weights, tokenizer and query model it uses.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from citewise.indexer.records import PaperRecord

from .biencoder_onnx import OnBatch, manifest_hash, paper_text, token_ids
from .query import ContextQuery
from .static_encoder import StaticEncoder
from .vocab import Vocab


class AttentionBagEncoder:
    """Papers by the context-weighted bag, queries by the bag's bi-encoder."""

    def __init__(self, model_dir: str | os.PathLike[str], threads: int = 2, batch_size: int = 64) -> None:
        import onnxruntime as ort

        self.dir = Path(model_dir)
        self.manifest = json.loads((self.dir / "manifest.json").read_text())
        self.bag = StaticEncoder((self.dir / self.manifest["bag_model"]).resolve(), threads=threads)
        self.dim = self.bag.dim
        self.table = np.load(self.dir / "embeddings.npy").astype(np.float32)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        # Threads wait without spinning: the same vectors (bit for bit) for ~30% less CPU and
        # 30-40% less time embedding 2,048 ACM-CR papers on a two-core machine at load ~10
        # (spinning threads take the cores from each other and from every other process).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        name = "scores.int8.onnx" if self.manifest.get("precision", "int8") == "int8" else "scores.onnx"
        self._scores = ort.InferenceSession(str(self.dir / name), opts, providers=["CPUExecutionProvider"])
        self.batch_size = batch_size
        self._hash = manifest_hash(self.manifest, extra=self.bag.model_hash)

    @property
    def model_hash(self) -> str:
        """Changes with the score graph, the table or the bag (and its query model)."""
        return self._hash

    @property
    def teacher(self):
        """The bi-encoder the bag was distilled from (it embeds the queries)."""
        return self.bag.teacher

    def encode_texts(self, texts: Sequence[str], on_batch: OnBatch | None = None) -> np.ndarray:
        """L2-normalised vectors (n, dim); papers sorted by length so a batch pads to its own.
        ``on_batch(n)`` after each batch of ``n`` texts: progress a few dozen papers at a time."""
        seqs = [np.asarray(ids, dtype=np.int64) for ids in token_ids(self.bag.tok, texts, self.bag.doc_len)]
        out = np.zeros((len(seqs), self.dim), dtype=np.float32)
        order = np.argsort([len(s) for s in seqs], kind="stable")
        for b in range(0, len(order), self.batch_size):
            ks = order[b : b + self.batch_size]
            ids, mask = Vocab.pad([seqs[k] for k in ks])
            s = self._scores.run(["s"], {"emb": self.table[ids] * mask[:, :, None], "mask": mask})[0]
            coef = self.bag.weights[ids] * np.exp(s) * mask
            vec = np.einsum("bn,bnd->bd", coef, self.bag.table[ids].astype(np.float32))
            out[ks] = vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-9)
            if on_batch is not None:
                on_batch(len(ks))
        return out

    def encode_papers(self, papers: Sequence[PaperRecord], on_batch: OnBatch | None = None) -> np.ndarray:
        return self.encode_texts([paper_text(p.title, p.abstract) for p in papers], on_batch)

    def encode_queries(self, queries: Sequence[ContextQuery]) -> np.ndarray:
        return self.bag.encode_queries(queries)

    def encode_query(self, q: ContextQuery) -> np.ndarray:
        return self.bag.encode_query(q)
