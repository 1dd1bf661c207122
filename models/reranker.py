"""The cross-encoder second stage (paper 004 §4.2), served with onnxruntime + tokenizers only.

``[CLS] query [SEP] candidate [SEP]`` -> one relevance score. The query is the local context (the
placeholder, when the caller marks it, is the literal ``[CIT]``) followed by the citing draft's
title and abstract; the candidate is the paper's title, abstract and keywords. The token budget
is split so the local context is never cut for the global one (query terms matter more than
candidate terms, paper 003).

This module must not import torch or transformers: the server ships without the train extra.
Training (``reranker_train``) and export (``reranker_export``) reuse :class:`PairEncoder`, so the
ids a model was trained on are exactly the ids it is served.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .focus import window_parts
from .query import Candidate, ContextQuery

log = logging.getLogger(__name__)

PLACEHOLDER = "[CIT]"
SHIPPED_DIR = Path(__file__).with_name(
    "reranker"
)  # models/reranker/: model.int8.onnx, tokenizer.json, manifest.json
MODEL_FILE = "model.int8.onnx"


@dataclass(frozen=True)
class EncodeSettings:
    """Sequence budget. 160 tokens keeps CPU training near 5 pairs/s; the local context keeps
    up to ``local_max`` tokens, the whole query at most ``query_max``, the candidate the rest."""

    max_len: int = 160
    query_max: int = 80
    local_max: int = 56

    def as_dict(self) -> dict[str, int]:
        return {"max_len": self.max_len, "query_max": self.query_max, "local_max": self.local_max}


def candidate_text(title: str, abstract: str = "", keywords: str = "", citing: str = "") -> str:
    """What the reranker reads of a paper (the same in training and serving): its title, then
    ``citing`` (how another paper cites it, where the store knows: ``models/citing_text.py``) before
    the abstract, since the token budget cuts from the end."""
    parts = [title.strip().rstrip(".")]
    for part in (citing, abstract, keywords):
        if part.strip():
            parts.append(part.strip())
    return ". ".join(p for p in parts if p)


def candidate_texts(pids: list[int], papers: Mapping, citing: Mapping[int, str] | None = None) -> list[str]:
    """:func:`candidate_text` of each paper id in order ("" for one ``papers`` lacks), with how
    the store's papers cite it where ``citing`` says: what the reranker scores."""
    citing = citing or {}
    out = []
    for pid in pids:
        p = papers.get(pid)
        out.append(candidate_text(p.title, p.abstract, p.keywords, citing.get(pid, "")) if p else "")
    return out


class PairEncoder:
    """Token ids of (query, candidate) pairs for a BERT-family tokenizer (``tokenizers`` only)."""

    def __init__(self, tokenizer, settings: EncodeSettings | None = None) -> None:
        self.tok = tokenizer
        self.tok.no_truncation()
        self.tok.no_padding()
        self.settings = settings or EncodeSettings()
        self.cls = self._special("[CLS]")
        self.sep = self._special("[SEP]")
        self.pad = self.tok.token_to_id("[PAD]") or 0

    def _special(self, token: str) -> int:
        tid = self.tok.token_to_id(token)
        if tid is None:
            raise ValueError(f"tokenizer has no {token} token: not a BERT-family tokenizer")
        return tid

    @classmethod
    def from_file(cls, path: str | Path, settings: EncodeSettings | None = None) -> PairEncoder:
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(path)), settings)

    def ids(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids if text else []

    def query_ids(self, query: ContextQuery) -> list[int]:
        """Local context first (up to ``local_max``), then citing title, then abstract, within ``query_max``."""
        s = self.settings
        out = self.local_ids(query)
        for part in (query.citing_title, query.citing_abstract):
            room = s.query_max - len(out)
            if room <= 1 or not part:
                continue
            out += [self.sep] + self.ids(part[:2000])[: room - 1]
        return out[: s.query_max]

    def local_ids(self, query: ContextQuery) -> list[int]:
        """The local context's ids: when the placeholder's position is known, a window around it
        with ``[CIT]`` at its place (issue 16; paper 004), two thirds of the budget before it
        when both sides are long (the words a citation supports mostly precede it); else the
        local text from its start, as in training."""
        s = self.settings
        if query.at < 0:
            return self.ids(query.local)[: s.local_max]
        before, after = window_parts(query)
        mark = self.ids(PLACEHOLDER)
        room = max(s.local_max - len(mark), 0)
        b, a = self.ids(before), self.ids(after)
        nb = min(len(b), max(room - len(a), room * 2 // 3))
        b = b[len(b) - nb :]
        return (b + mark + a[: room - len(b)])[: s.local_max]

    def candidate_ids(self, text: str) -> list[int]:
        # Longer than any budget needs; the pair is cut to fit when joined.
        return self.ids(text[:3000])[: self.settings.max_len]

    def pair(self, q: list[int], c: list[int]) -> tuple[list[int], list[int]]:
        """``[CLS] q [SEP] c [SEP]`` cut to ``max_len`` (the candidate gives way), with segment ids."""
        room = self.settings.max_len - len(q) - 3
        c = c[: max(room, 0)]
        ids = [self.cls, *q, self.sep, *c, self.sep]
        types = [0] * (len(q) + 2) + [1] * (len(c) + 1)
        return ids, types

    def batch(self, pairs: list[tuple[list[int], list[int]]]) -> dict[str, np.ndarray]:
        """Pad a list of ``pair`` results to their longest member (int64 arrays for ONNX/torch)."""
        n, width = len(pairs), max(len(ids) for ids, _ in pairs)
        input_ids = np.full((n, width), self.pad, dtype=np.int64)
        types = np.zeros((n, width), dtype=np.int64)
        mask = np.zeros((n, width), dtype=np.int64)
        for i, (ids, tt) in enumerate(pairs):
            input_ids[i, : len(ids)] = ids
            types[i, : len(tt)] = tt
            mask[i, : len(ids)] = 1
        return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": types}


@dataclass
class RerankSettings:
    """How much of the prefetch the reranker reads: at most ``max_candidates``, within
    ``budget_s`` seconds (the best-prefetched first, so a cut keeps the most promising). The
    defaults suit the editor (the reranked list should follow the placeholder within ~1.5 s on a
    laptop CPU); ``citewise eval`` passes its own ``--candidates`` and ``--budget``."""

    max_candidates: int = 50
    budget_s: float = 1.5
    batch_size: int = 16
    threads: int = 0  # onnxruntime intra-op threads; 0 = its default
    # 0: the cross-encoder's order alone; w > 0: reciprocal-rank fusion of the cross-encoder's rank
    # with the prefetch rank weighted w (chosen on ACM-CR dev, stored in the manifest).
    prefetch_weight: float = 0.0


def fused_order(scores: list[float], prefetch_weight: float = 0.0, k: float = 60.0) -> list[int]:
    """Indices of candidates (given in prefetch order) best first. Scored candidates (finite
    score) come first, by cross-encoder rank fused with their prefetch rank when
    ``prefetch_weight`` > 0; unscored ones (the time budget ran out) follow in prefetch order."""
    scored = [i for i, s in enumerate(scores) if s != float("-inf")]
    by_ce = sorted(scored, key=lambda i: (-scores[i], i))
    if prefetch_weight > 0:
        ce_rank = {i: r for r, i in enumerate(by_ce, start=1)}
        by_ce = sorted(scored, key=lambda i: (-(1 / (k + ce_rank[i]) + prefetch_weight / (k + i + 1)), i))
    return by_ce + [i for i, s in enumerate(scores) if s == float("-inf")]


def reordered(ids: list[str], scores: list[float], candidates: int, prefetch_weight: float) -> list[str]:
    """The prefetch list ``ids`` with its first ``candidates`` in the served reranker's order, from
    scores of (at least) that head: one scoring of the top N gives every smaller N for free."""
    order = fused_order(scores[:candidates], prefetch_weight) if candidates else []
    return [ids[i] for i in order] + ids[len(order) :]


class CrossEncoderReranker:
    """A :class:`~citewise.models.recommender.SecondStage` backed by an ONNX cross-encoder."""

    name = "cross-encoder"

    def __init__(
        self, model_dir: str | Path, settings: RerankSettings | None = None, model_file: str = MODEL_FILE
    ) -> None:
        import onnxruntime as ort

        self.dir = Path(model_dir)
        self.manifest: dict = (
            json.loads((self.dir / "manifest.json").read_text())
            if (self.dir / "manifest.json").exists()
            else {}
        )
        enc = EncodeSettings(**self.manifest.get("encode", {}))
        self.encoder = PairEncoder.from_file(self.dir / "tokenizer.json", enc)
        self.settings = settings or RerankSettings(**self.manifest.get("serve", {}))
        opts = ort.SessionOptions()
        if self.settings.threads:
            opts.intra_op_num_threads = self.settings.threads
        self.session = ort.InferenceSession(
            str(self.dir / model_file), opts, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self.session.get_inputs()}
        self._cache: OrderedDict[str, list[int]] = OrderedDict()  # candidate text -> ids (LRU)
        self._cache_size = 50_000
        self._lock = threading.Lock()

    def _candidate_ids(self, text: str) -> list[int]:
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        ids = self.encoder.candidate_ids(text)
        with self._lock:
            self._cache[text] = ids
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return ids

    def score_texts(
        self, query: ContextQuery, texts: list[str], deadline: float | None = None
    ) -> list[float]:
        """Scores of candidate texts, best-effort within ``deadline`` (``perf_counter`` time):
        the texts not reached get ``-inf``."""
        q = self.encoder.query_ids(query)
        scores = [float("-inf")] * len(texts)
        bs = max(1, self.settings.batch_size)
        for start in range(0, len(texts), bs):
            if deadline is not None and start and time.perf_counter() > deadline:
                break
            chunk = [self.encoder.pair(q, self._candidate_ids(t)) for t in texts[start : start + bs]]
            feeds = {k: v for k, v in self.encoder.batch(chunk).items() if k in self._inputs}
            out = self.session.run(None, feeds)[0].reshape(-1)
            scores[start : start + len(chunk)] = [float(x) for x in out]
        return scores

    def rerank(
        self,
        query: ContextQuery,
        candidates: list[Candidate],
        papers: dict,
        citing: Mapping[int, str] | None = None,
    ) -> list[Candidate]:
        """The first ``max_candidates`` reordered by the cross-encoder, scored in prefetch order until
        the time budget runs out; the unscored ones keep their prefetch order after the scored ones.
        ``citing``: paper id -> how the store's papers cite it, read beside title and abstract."""
        deadline = time.perf_counter() + self.settings.budget_s
        head = [c for c in candidates[: self.settings.max_candidates] if c.paper_id in papers]
        texts = candidate_texts([c.paper_id for c in head], papers, citing)
        scores = self.score_texts(query, texts, deadline)
        order = fused_order(scores, self.settings.prefetch_weight)
        out = []
        for rank, i in enumerate(order, start=1):
            c = head[i]
            if scores[i] != float("-inf"):
                c.sources[self.name] = scores[i]
                c.ranks[self.name] = rank
            out.append(c)
        seen = {c.paper_id for c in head}
        return out + [c for c in candidates if c.paper_id not in seen]


def load_shipped(
    model_dir: str | Path | None = None, settings: RerankSettings | None = None
) -> CrossEncoderReranker | None:
    """The shipped reranker when its files exist and its manifest says it measured better
    (``use_by_default``); ``None`` otherwise, so BM25 serving never depends on it."""
    folder = Path(model_dir) if model_dir else SHIPPED_DIR
    manifest = folder / "manifest.json"
    if not (folder / MODEL_FILE).exists() or not manifest.exists():
        return None
    try:
        if not json.loads(manifest.read_text()).get("use_by_default", False):
            return None
        return CrossEncoderReranker(folder, settings)
    except Exception as exc:  # a broken model must not break serving
        log.warning("reranker not loaded from %s: %s", folder, exc)
        return None
