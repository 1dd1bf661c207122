"""Serving-side bi-encoder (issue 16's dense prefetch): all-MiniLM-L6-v2 fine-tuned on citing
sentences (:mod:`training.biencoder`), int8 ONNX, onnxruntime + tokenizers only.

Same interface as :class:`~citewise.models.hatten_onnx.HattenEncoder`, so the ANN index, the
prefetch fusion and ``citewise index --embed`` take either; the model folder's manifest says which
(``"kind": "biencoder"``). Papers are sorted by token length and batched so each batch pads only to
its own longest text (most of the speed on two cores).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from citewise.indexer.records import PaperRecord

from .query import ContextQuery
from .reranker import PLACEHOLDER

# Told how many texts one batch of an encoder embedded: progress reports within a long call.
OnBatch = Callable[[int], None]


def query_text(local: str, citing_title: str = "") -> str:
    """The sentence without its placeholder, then the draft's title (training reads the same)."""
    text = " ".join(local.replace(PLACEHOLDER, " ").split())
    return f"{text} [SEP] {citing_title}" if citing_title else text


def paper_text(title: str, abstract: str) -> str:
    """What the bi-encoder reads of a paper (as in training: title. abstract, cut by tokens)."""
    return f"{title.strip().rstrip('.')}. {abstract.strip()}"[:3000]


# Characters read of a long text per token kept: a text is cut (at a space) to this many times the
# token limit before tokenizing, and only a cut text that then falls short of the limit is read again
# in full. Tokenizing all of a 3,000-character abstract to keep its first 128 word pieces was a
# third of the CPU of embedding ACM-CR; cut at 6 characters a token, 8,192 random ACM-CR papers got
# the same ids, every one, for 35% less tokenizing CPU (236 of them read again).
CHARS_PER_TOKEN = 6


def _head(text: str, chars: int) -> str:
    """``text`` up to its last space before ``chars`` characters (whole words only), or all of it."""
    if len(text) <= chars:
        return text
    cut = text.rfind(" ", 0, chars)
    return text if cut <= 0 else text[:cut]


def token_ids(tok, texts: Sequence[str], max_len: int) -> list[list[int]]:
    """The ids ``tok`` gives each text truncated to ``max_len`` tokens, reading only the start of a
    long text. Why the same ids: the tokenizer splits words at spaces before cutting them into word
    pieces, so a text cut at a space yields the full text's first tokens; a cut text that reaches
    ``max_len`` is therefore truncated to the same ids, and one that does not is tokenized whole."""
    tok.enable_truncation(max_len)
    heads = [_head(t, CHARS_PER_TOKEN * max_len) for t in texts]
    encoded = tok.encode_batch(heads)
    ids = [e.ids for e in encoded]
    again = [  # tokens, not ids: a tokenizer that pads has max_len ids for any text
        i
        for i, (t, h, e) in enumerate(zip(texts, heads, encoded, strict=True))
        if h is not t and sum(e.attention_mask) < max_len
    ]
    for i, e in zip(again, tok.encode_batch([texts[i] for i in again]), strict=True):
        ids[i] = e.ids
    return ids


def manifest_hash(manifest: dict, extra: str = "") -> str:
    """A model's identity from its manifest's file digests (plus ``extra``: another model it
    depends on), so embeddings made with other weights or another tokenizer are rebuilt."""
    h = hashlib.sha256()
    for name, digest in sorted(manifest.get("files", {}).items()):
        h.update(f"{name}={digest}".encode())
    if extra:
        h.update(extra.encode())
    return h.hexdigest()[:16]


class BiEncoder:
    """Embeds papers (title + abstract, ``doc_len`` tokens) and queries (sentence + draft title)."""

    def __init__(self, model_dir: str | os.PathLike[str], threads: int = 2, batch_size: int = 32) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.dir = Path(model_dir)
        self.manifest = json.loads((self.dir / "manifest.json").read_text())
        self.query_len = int(self.manifest.get("query_len", 64))
        self.doc_len = int(self.manifest.get("doc_len", 128))
        self.dim = int(self.manifest.get("dim", 384))
        self.tok = Tokenizer.from_file(str(self.dir / "tokenizer.json"))
        self.tok.no_padding()
        self.pad = self.tok.token_to_id("[PAD]") or 0
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        # Threads wait without spinning. Same vectors (bit for bit); on a two-core machine at load
        # ~8, 768 citing sentences took 7.2 CPU s and 15 s instead of 10 CPU s and 26-31 s, and
        # one query 10-13 ms instead of 40 ms (median): spinning threads fight for the cores.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(
            str(self.dir / "model.int8.onnx"), opts, providers=["CPUExecutionProvider"]
        )
        self.batch_size = batch_size
        self._hash = manifest_hash(self.manifest)

    @property
    def model_hash(self) -> str:
        """Changes whenever the weights or the tokenizer change (indexes rebuild on change)."""
        return self._hash

    def _ids(self, texts: Sequence[str], max_len: int) -> list[list[int]]:
        return token_ids(self.tok, texts, max_len)

    def _run(self, seqs: list[list[int]]) -> np.ndarray:
        width = max(len(s) for s in seqs)
        ids = np.full((len(seqs), width), self.pad, dtype=np.int64)
        mask = np.zeros((len(seqs), width), dtype=np.int64)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = 1
        return self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]

    def encode_texts(self, texts: Sequence[str], max_len: int, on_batch: OnBatch | None = None) -> np.ndarray:
        """Vectors (n, dim), texts sorted by length so a batch pads to its own; ``on_batch(n)``
        after each batch of ``n`` texts (progress: a few seconds of work apart, not a whole call)."""
        seqs = self._ids(texts, max_len)
        out = np.zeros((len(seqs), self.dim), dtype=np.float32)
        order = np.argsort([len(s) for s in seqs], kind="stable")
        for s in range(0, len(order), self.batch_size):
            ks = order[s : s + self.batch_size]
            out[ks] = self._run([seqs[k] for k in ks])
            if on_batch is not None:
                on_batch(len(ks))
        return out

    def encode_papers(self, papers: Sequence[PaperRecord], on_batch: OnBatch | None = None) -> np.ndarray:
        """L2-normalised float32 vectors (n, dim) of papers' title + abstract."""
        if not papers:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.encode_texts([paper_text(p.title, p.abstract) for p in papers], self.doc_len, on_batch)

    def encode_queries(self, queries: Sequence[ContextQuery]) -> np.ndarray:
        if not queries:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.encode_texts([query_text(q.local, q.citing_title) for q in queries], self.query_len)

    def encode_query(self, q: ContextQuery) -> np.ndarray:
        """One query's vector (dim,)."""
        return self.encode_queries([q])[0]
