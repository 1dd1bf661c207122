"""HAtten, the hierarchical-attention text encoder of the prefetch (paper 004, section 4.1), in PyTorch.

Two levels: a *paragraph encoder* turns each field (title, abstract, local context, citing title,
citing abstract) into one vector (token embeddings + sinusoidal positions, one transformer encoder
layer, multi-head pooling with trainable weights, ReLU, linear); a *document encoder* adds a learned
paragraph-type embedding to each paragraph vector and runs one more transformer layer and pooling.
Queries and papers share every weight; relevance is the cosine of the two vectors.

Why our own attention layer instead of ``nn.TransformerEncoderLayer``: the latter switches to a fused
kernel in eval mode that the ONNX exporter cannot trace, and the serving graph must be plain ONNX.
Why the embedding table sits outside the exported graphs: queries and papers share it, so the
serving side keeps it once (``embeddings.npy``, the base vectors already projected to ``d_model``)
and feeds the graphs embedded tokens; the transformer graphs are then tiny and int8-quantised.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

# Paragraph types (the document encoder's learned type embeddings).
TITLE, ABSTRACT, LOCAL, CITING_TITLE, CITING_ABSTRACT = range(5)
TYPE_NAMES = ["title", "abstract", "local", "citing_title", "citing_abstract"]


@dataclass
class HattenConfig:
    """Sizes, saved with every checkpoint and in the shipped manifest."""

    vocab_size: int
    emb_dim: int = 50  # base vectors (GloVe 6B 50d)
    d_model: int = 64
    n_heads: int = 4  # self-attention heads
    ff_dim: int = 128
    pool_heads: int = 4  # multi-head pooling heads
    dropout: float = 0.1
    max_len: int = 256  # positional encoding table
    n_types: int = 5
    freeze_emb: bool = False
    max_title: int = 24
    max_abstract: int = 128
    max_local: int = 48
    bow_init: bool = True  # start as a bag-of-words centroid (see Hatten.bow_init)
    token_bias: bool = False  # per-word pooling bias (initialised to log idf), see Hatten
    out_dim: int = 0  # > 0: a linear head to this size (a teacher's dimension; 0 = d_model, no head)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> HattenConfig:
        data = json.loads(Path(path).read_text())
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def sinusoid(n: int, d: int) -> torch.Tensor:
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)[:, : d // 2]
    return pe


class EncoderLayer(nn.Module):
    """Post-norm transformer encoder layer (Vaswani et al.), written out so it exports to plain ONNX."""

    def __init__(self, d: int, heads: int, ff: int, dropout: float) -> None:
        super().__init__()
        if d % heads:
            raise ValueError(f"d_model {d} is not divisible by {heads} heads")
        self.h = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ff1 = nn.Linear(d, ff)
        self.ff2 = nn.Linear(ff, d)
        self.norm1 = nn.LayerNorm(d)
        self.norm2 = nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        att = q @ k.transpose(-1, -2) / math.sqrt(d // self.h)
        att = att + (1.0 - mask)[:, None, None, :] * -10000.0
        att = self.drop(torch.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, n, d)
        x = self.norm1(x + self.drop(self.out(y)))
        return self.norm2(x + self.drop(self.ff2(self.drop(F.relu(self.ff1(x))))))


class MultiHeadPooling(nn.Module):
    """Multi-head pooling (Liu & Lapata 2019) + ReLU + linear, equations (1)-(2) of paper 004."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        if d % heads:
            raise ValueError(f"d_model {d} is not divisible by {heads} pooling heads")
        self.h = heads
        self.value = nn.Linear(d, d)
        self.score = nn.Linear(d, heads)
        self.proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        b, n, d = x.shape
        a = self.score(x) + ((1.0 - mask) * -10000.0)[:, :, None]  # (b, n, h)
        if bias is not None:  # per-token prior on the attention score (e.g. log idf)
            a = a + bias[:, :, None]
        a = torch.softmax(a, dim=1)
        v = self.value(x).reshape(b, n, self.h, d // self.h)
        pooled = (a[:, :, :, None] * v).sum(dim=1).reshape(b, d)
        return self.proj(F.relu(pooled))


class ParagraphEncoder(nn.Module):
    """Embedded tokens (b, n, d_model) + mask -> one vector per paragraph (b, d_model)."""

    def __init__(self, cfg: HattenConfig) -> None:
        super().__init__()
        self.register_buffer("pe", sinusoid(cfg.max_len, cfg.d_model), persistent=False)
        # Positions start small: at full amplitude the sinusoids drown the word vectors and an
        # untrained encoder maps every paper to nearly the same point (nothing to mine from).
        self.pe_scale = nn.Parameter(torch.tensor(0.1))
        self.layer = EncoderLayer(cfg.d_model, cfg.n_heads, cfg.ff_dim, cfg.dropout)
        self.pool = MultiHeadPooling(cfg.d_model, cfg.pool_heads)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(
        self, emb: torch.Tensor, mask: torch.Tensor, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = self.drop(emb + self.pe_scale * self.pe[: emb.shape[1]][None])
        return self.pool(self.layer(x, mask), mask, bias)


class DocumentEncoder(nn.Module):
    """Paragraph vectors (b, p, d) + type ids (b, p) + presence mask (b, p) -> document vector (b, d)."""

    def __init__(self, cfg: HattenConfig) -> None:
        super().__init__()
        self.types = nn.Embedding(cfg.n_types, cfg.d_model)
        self.layer = EncoderLayer(cfg.d_model, cfg.n_heads, cfg.ff_dim, cfg.dropout)
        self.pool = MultiHeadPooling(cfg.d_model, cfg.pool_heads)

    def forward(self, paras: torch.Tensor, types: torch.Tensor, pmask: torch.Tensor) -> torch.Tensor:
        x = paras + self.types(types)
        return self.pool(self.layer(x, pmask), pmask)


class Hatten(nn.Module):
    """The whole encoder; ``encode`` takes a list of (ids, mask, type) paragraphs of one batch."""

    def __init__(self, cfg: HattenConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(cfg.vocab_size, cfg.emb_dim, padding_idx=0)
        self.emb.weight.requires_grad = not cfg.freeze_emb
        self.proj = nn.Linear(cfg.emb_dim, cfg.d_model)
        # Optional per-word pooling prior: the paragraph pooling starts as an idf-weighted mean
        # (attempt 3 in docs/hatten.md). Serving keeps it as the last column of the token table.
        self.tok_bias = nn.Embedding(cfg.vocab_size, 1) if cfg.token_bias else None
        if self.tok_bias is not None:
            nn.init.zeros_(self.tok_bias.weight)
        self.para = ParagraphEncoder(cfg)
        self.doc = DocumentEncoder(cfg)
        # The head maps to a teacher's vector size (distillation, training/hatten_distill.py). It
        # starts at zero: there the student's vector is a skip path (the static bag) plus this
        # head's output, so the untrained student is exactly the bag it has to improve on.
        self.head = nn.Linear(cfg.d_model, cfg.out_dim) if cfg.out_dim > 0 else None
        if self.head is not None:
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)
        if cfg.bow_init:
            self.bow_init()

    @torch.no_grad()
    def bow_init(self) -> None:
        """Initialise so the untrained encoder is a bag-of-words centroid of the word vectors.

        Why: with random layers every paper starts at nearly the same point, and the short CPU
        runs this project can afford (a few thousand mini-batches) never get far from there
        (attempt 1 in docs/hatten.md). With the attention and feed-forward outputs at zero the
        layers are identities up to LayerNorm, uniform pooling scores make the pooling a mean,
        and identity value/output maps pass the mean through (ReLU keeps the positive half; when
        ``d_model >= 2 * emb_dim`` the maps carry [x; -x] through the ReLU so nothing is lost);
        training then only has to *improve* a sensible lexical-semantic retriever.
        """
        d = self.cfg.d_model
        eye = torch.eye(d)
        for layer in (self.para.layer, self.doc.layer):
            layer.out.weight.zero_()
            layer.out.bias.zero_()
            layer.ff2.weight.zero_()
            layer.ff2.bias.zero_()
        e = self.cfg.emb_dim
        exact = d >= 2 * e  # room for [x; -x]: ReLU then loses nothing (attempt 3)
        if exact:
            self.proj.weight.zero_()
            self.proj.weight[:e, :e] = torch.eye(e)
            self.proj.bias.zero_()
        for pool in (self.para.pool, self.doc.pool):
            pool.score.weight.zero_()
            pool.score.bias.zero_()
            pool.value.bias.zero_()
            pool.proj.bias.zero_()
            if exact:
                pool.value.weight.zero_()
                pool.value.weight[:e, :e] = torch.eye(e)
                pool.value.weight[e : 2 * e, :e] = -torch.eye(e)
                pool.proj.weight.zero_()
                pool.proj.weight[:e, :e] = torch.eye(e)
                pool.proj.weight[:e, e : 2 * e] = -torch.eye(e)
            else:
                pool.value.weight.copy_(eye)
                pool.proj.weight.copy_(eye)
        self.doc.types.weight.mul_(0.01)

    def embed_tokens(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Projected token vectors, zero at padding (so serving's ``table[ids]`` is identical)."""
        return self.proj(self.emb(ids)) * mask[:, :, None]

    def encode(self, paragraphs: list[tuple[torch.Tensor, torch.Tensor, int]]) -> torch.Tensor:
        """L2-normalised document vectors (b, d_model or out_dim) of a batch given field by field."""
        return self.doc_vector(*self.paragraphs(paragraphs))

    def doc_raw(self, paras: torch.Tensor, types: torch.Tensor, pmask: torch.Tensor) -> torch.Tensor:
        """The document vector before normalisation (through the head when there is one): what the
        exported document graph returns, so serving can add a skip path before normalising."""
        v = self.doc(paras, types, pmask)
        return self.head(v) if self.head is not None else v

    def doc_vector(self, paras: torch.Tensor, types: torch.Tensor, pmask: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.doc_raw(paras, types, pmask), dim=-1)

    def paragraphs(
        self, paragraphs: list[tuple[torch.Tensor, torch.Tensor, int]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(paragraph vectors, type ids, presence mask) of a batch given field by field."""
        vecs, present = [], []
        for ids, mask, _ in paragraphs:
            bias = self.tok_bias(ids)[:, :, 0] * mask if self.tok_bias is not None else None
            vecs.append(self.para(self.embed_tokens(ids, mask), mask, bias))
            present.append((mask.sum(dim=1) > 0).float())
        paras = torch.stack(vecs, dim=1)
        pmask = torch.stack(present, dim=1)
        # A row with no text at all still attends to its first (empty) paragraph: no NaN, no crash.
        empty = (pmask.sum(dim=1, keepdim=True) == 0).float()
        pmask = torch.cat([torch.maximum(pmask[:, :1], empty), pmask[:, 1:]], dim=1)
        b = paras.shape[0]
        types = torch.tensor([t for _, _, t in paragraphs], dtype=torch.long)[None].expand(b, -1)
        return paras, types, pmask

    def table(self) -> torch.Tensor:
        """Embedding table already projected to d_model (+ the pooling bias column when used):
        what serving looks tokens up in."""
        with torch.no_grad():
            t = self.proj(self.emb.weight).clone()
            if self.tok_bias is not None:
                t = torch.cat([t, self.tok_bias.weight], dim=1)
            t[0] = 0.0
            return t

    # -- persistence --------------------------------------------------------------------------
    def save(self, folder: str | Path, extra: dict | None = None) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.cfg.save(folder / "config.json")
        tmp = folder / "model.pt.tmp"
        torch.save({"state": self.state_dict(), "extra": extra or {}}, tmp)
        tmp.replace(folder / "model.pt")

    @classmethod
    def load(cls, folder: str | Path) -> tuple[Hatten, dict]:
        folder = Path(folder)
        model = cls(HattenConfig.load(folder / "config.json"))
        blob = torch.load(folder / "model.pt", map_location="cpu", weights_only=False)
        model.load_state_dict(blob["state"])
        return model, blob.get("extra", {})
