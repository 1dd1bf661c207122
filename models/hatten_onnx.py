"""Serving-side HAtten encoder: onnxruntime + numpy + tokenizers only (no torch at serve time).

Loads a model folder written by :mod:`training.hatten_export` and turns papers and queries
into L2-normalised float32 vectors. Papers are sorted by length and batched so a batch pads to its
own longest abstract, which is most of the speed on two cores.

A HAtten distilled from the bi-encoder (:mod:`training.hatten_distill`, issue 26) names a static
model in its manifest (``"bag_model"``): a paper's vector is then the static bag of word pieces
plus the HAtten graph's output, normalised (the graph learned what the bag misses), and queries are
embedded by the bag's query model, the bi-encoder whose paper vectors both were fitted to.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from citewise.indexer.records import PaperRecord

from .biencoder_onnx import OnBatch, paper_text
from .query import ContextQuery
from .vocab import Vocab

# Paragraph types, as in models/hatten.py (kept here so serving never imports torch).
TITLE, ABSTRACT, LOCAL, CITING_TITLE, CITING_ABSTRACT = range(5)


class HattenEncoder:
    """Embeds papers (title + abstract) and queries (local + citing title + citing abstract)."""

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        precision: str | None = None,
        threads: int = 2,
        batch_size: int = 64,
    ) -> None:
        import onnxruntime as ort

        self.dir = Path(model_dir)
        self.manifest = json.loads((self.dir / "manifest.json").read_text())
        cfg = self.manifest["config"]
        self.max_title = int(cfg["max_title"])
        self.max_abstract = int(cfg["max_abstract"])
        self.max_local = int(cfg["max_local"])
        self.dim = int(cfg.get("out_dim") or cfg["d_model"])
        self.precision = precision or self.manifest.get("precision", "int8")
        suffix = ".int8.onnx" if self.precision == "int8" else ".onnx"
        self.vocab = Vocab(self.dir / "tokenizer.json")
        self.table = np.load(self.dir / "embeddings.npy").astype(np.float32)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        providers = ["CPUExecutionProvider"]
        self._para = ort.InferenceSession(str(self.dir / f"paragraph{suffix}"), opts, providers=providers)
        self._doc = ort.InferenceSession(str(self.dir / f"document{suffix}"), opts, providers=providers)
        self.batch_size = batch_size
        h = hashlib.sha256()
        for name in ("tokenizer.json", "embeddings.npy", f"paragraph{suffix}", f"document{suffix}"):
            h.update(name.encode())
            h.update(self.manifest.get("files", {}).get(name, "").encode() or (self.dir / name).read_bytes())
        self.bag = None
        if isinstance(self.manifest.get("bag_model"), str):
            from .static_encoder import StaticEncoder

            self.bag = StaticEncoder((self.dir / self.manifest["bag_model"]).resolve(), threads=threads)
            h.update(self.bag.model_hash.encode())
        self._hash = h.hexdigest()[:16]

    @property
    def model_hash(self) -> str:
        """Changes whenever the weights, vocabulary or precision change (indexes rebuild on change)."""
        return self._hash

    # -- internals ----------------------------------------------------------------------------
    def _paragraphs(self, seqs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        ids, mask = Vocab.pad(seqs)
        emb = self.table[ids]
        vec = self._para.run(["vec"], {"emb": emb, "mask": mask})[0]
        return vec, (mask.sum(axis=1) > 0).astype(np.float32)

    def _encode(
        self,
        fields: list[tuple[list[np.ndarray], int]],
        one_run: bool = False,
        skip: np.ndarray | None = None,
    ) -> np.ndarray:
        """Paragraph graph per field (or one run over all fields: fewer calls for short queries)."""
        n = len(fields[0][0])
        if one_run:
            v, p = self._paragraphs([s for seqs, _ in fields for s in seqs])
            paras = v.reshape(len(fields), n, -1).transpose(1, 0, 2)
            pmask = p.reshape(len(fields), n).T.copy()
        else:
            vecs, present = [], []
            for seqs, _ in fields:
                v, p = self._paragraphs(seqs)
                vecs.append(v)
                present.append(p)
            paras = np.stack(vecs, axis=1)
            pmask = np.stack(present, axis=1)
        paras = np.ascontiguousarray(paras, dtype=np.float32)
        pmask[:, 0] = np.maximum(pmask[:, 0], (pmask.sum(axis=1) == 0).astype(np.float32))
        types = np.tile(np.array([[t for _, t in fields]], dtype=np.int64), (n, 1))
        out = self._doc.run(["vec"], {"paras": paras, "types": types, "pmask": pmask})[0]
        if skip is not None:
            out = out + skip
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out.astype(np.float32)

    # -- API ----------------------------------------------------------------------------------
    def encode_texts(
        self, titles: Sequence[str], abstracts: Sequence[str], on_batch: OnBatch | None = None
    ) -> np.ndarray:
        """Paper vectors from raw title/abstract strings (same as :meth:`encode_papers`)."""
        t_ids = self.vocab.encode(list(titles), self.max_title)
        a_ids = self.vocab.encode(list(abstracts), self.max_abstract)
        out = np.zeros((len(t_ids), self.dim), dtype=np.float32)
        bag = None
        if self.bag is not None:
            bag = self.bag.encode_texts([paper_text(t, a) for t, a in zip(titles, abstracts, strict=True)])
        order = np.argsort([len(a) for a in a_ids], kind="stable")
        for s in range(0, len(order), self.batch_size):
            ks = order[s : s + self.batch_size]
            fields = [([t_ids[k] for k in ks], TITLE), ([a_ids[k] for k in ks], ABSTRACT)]
            out[ks] = self._encode(fields, skip=None if bag is None else bag[ks])
            if on_batch is not None:
                on_batch(len(ks))
        return out

    def encode_papers(self, papers: Sequence[PaperRecord], on_batch: OnBatch | None = None) -> np.ndarray:
        """L2-normalised float32 vectors (n, dim) of papers' title + abstract."""
        if not papers:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.encode_texts([p.title for p in papers], [p.abstract for p in papers], on_batch)

    def encode_queries(self, queries: Sequence[ContextQuery]) -> np.ndarray:
        """L2-normalised float32 vectors (n, dim) of citation contexts with their global context."""
        if not queries:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.bag is not None:
            return self.bag.encode_queries(queries)
        loc = self.vocab.encode([q.local for q in queries], self.max_local)
        ct = self.vocab.encode([q.citing_title for q in queries], self.max_title)
        ca = self.vocab.encode([q.citing_abstract for q in queries], self.max_abstract)
        out = np.zeros((len(queries), self.dim), dtype=np.float32)
        for s in range(0, len(queries), self.batch_size):
            sl = slice(s, s + self.batch_size)
            out[sl] = self._encode(
                [(loc[sl], LOCAL), (ct[sl], CITING_TITLE), (ca[sl], CITING_ABSTRACT)],
                one_run=len(queries) <= 4,
            )
        return out

    def encode_query(self, q: ContextQuery) -> np.ndarray:
        """One query's vector (dim,)."""
        if self.bag is not None:
            return self.bag.encode_query(q)
        return self.encode_queries([q])[0]
