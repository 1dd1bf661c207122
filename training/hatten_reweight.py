"""Attempt 2 of the distilled HAtten (issue 26): attention that re-weights the static bag's rows.

Why: in attempt 1 (``training/hatten_distill.py``) the HAtten output went through a head started at
zero, so at first no gradient reached the transformer and the student stayed the static bag. Here
HAtten's attention pooling *is* the output: a paper's vector is ``normalise(sum_t w_t e^{s_t} r_t)``
over its word pieces, with ``r_t`` and ``w_t`` the static model's row and weight (frozen) and
``s_t`` a score from one transformer layer over the pieces in context. The score layer starts at
zero (``s = 0``: the static bag exactly), and its gradient is not zero from the first step: every
score moves the vector. What it can learn is which words matter in this paper's context, not new
word vectors.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from citewise.models.static_encoder import StaticEncoder
from training.hatten import EncoderLayer, sinusoid


@dataclass
class ReweightConfig:
    vocab_size: int
    dim: int  # the bag's (and the teacher's) dimension
    d_model: int = 64
    n_heads: int = 4
    ff_dim: int = 128
    dropout: float = 0.1
    max_len: int = 256
    train_rows: bool = False  # attempt 3: the bag's rows trained too (sparse), under the attention


class ReweightStudent(nn.Module):
    """Frozen bag rows and weights; a projection, one encoder layer and a zero-started score."""

    def __init__(self, cfg: ReweightConfig, rows: np.ndarray, weights: np.ndarray) -> None:
        super().__init__()
        self.cfg = cfg
        self.register_buffer("rows", torch.from_numpy(rows.astype(np.float32)))
        self.register_buffer("weights", torch.from_numpy(weights.astype(np.float32)))
        unit = self.rows / self.rows.norm(dim=1, keepdim=True).clamp_min(1e-9)
        self.register_buffer("unit", unit)
        self.register_buffer("pe", sinusoid(cfg.max_len, cfg.d_model), persistent=False)
        self.proj = nn.Linear(cfg.dim, cfg.d_model)
        self.layer = EncoderLayer(cfg.d_model, cfg.n_heads, cfg.ff_dim, cfg.dropout)
        self.score = nn.Linear(cfg.d_model, 1)
        nn.init.zeros_(self.score.weight)
        nn.init.zeros_(self.score.bias)
        self.rows_emb = (
            nn.Embedding.from_pretrained(self.rows.clone(), freeze=False, sparse=True)
            if cfg.train_rows
            else None
        )

    def scores(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Per-piece log re-weighting ``s`` (b, n); 0 at padding."""
        x = self.proj(self.unit[ids]) * mask[:, :, None] + 0.1 * self.pe[: ids.shape[1]][None]
        return self.score(self.layer(x, mask))[:, :, 0] * mask

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Normalised paper vectors (b, dim)."""
        coef = self.weights[ids] * torch.exp(self.scores(ids, mask)) * mask
        rows = self.rows_emb(ids) if self.rows_emb is not None else self.rows[ids]
        return F.normalize((coef[:, :, None] * rows).sum(1), dim=-1)

    def save(self, folder: Path, extra: dict | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        state = {k: v for k, v in self.state_dict().items() if k not in ("rows", "weights", "unit")}
        tmp = folder / "model.pt.tmp"
        torch.save({"config": asdict(self.cfg), "state": state, "extra": extra or {}}, tmp)
        tmp.replace(folder / "model.pt")

    @classmethod
    def load(cls, folder: Path, bag: StaticEncoder) -> ReweightStudent:
        blob = torch.load(folder / "model.pt", weights_only=False)
        model = cls(ReweightConfig(**blob["config"]), bag.table, bag.weights)
        model.load_state_dict(blob["state"], strict=False)
        return model

    @classmethod
    def new(cls, bag: StaticEncoder, d_model: int = 64, train_rows: bool = False) -> ReweightStudent:
        cfg = ReweightConfig(
            vocab_size=int(bag.table.shape[0]),
            dim=bag.dim,
            d_model=d_model,
            ff_dim=2 * d_model,
            train_rows=train_rows,
        )
        return cls(cfg, bag.table, bag.weights)


class _Scores(nn.Module):
    """The exported graph: embedded pieces (``embeddings.npy`` rows, zero at padding) + mask -> s."""

    def __init__(self, model: ReweightStudent) -> None:
        super().__init__()
        self.m = model

    def forward(self, emb: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = emb + 0.1 * self.m.pe[: emb.shape[1]][None]
        return self.m.score(self.m.layer(x, mask))[:, :, 0] * mask


def export(run: Path, out: Path, bag_dir: Path, extra: dict) -> Path:
    """The serving folder of :class:`citewise.models.attention_bag.AttentionBagEncoder`."""
    import os

    from onnxruntime.quantization import QuantType, quantize_dynamic

    from citewise.indexer.index_files import file_sha256

    model = ReweightStudent.load(run / "ckpt", StaticEncoder(bag_dir)).eval()
    out.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        np.save(out / "embeddings.npy", model.proj(model.unit).numpy().astype(np.float16))
        torch.onnx.export(
            _Scores(model),
            (torch.randn(3, 7, model.cfg.d_model), torch.ones(3, 7)),
            str(out / "scores.onnx"),
            input_names=["emb", "mask"],
            output_names=["s"],
            dynamic_axes={"emb": {0: "n", 1: "len"}, "mask": {0: "n", 1: "len"}, "s": {0: "n", 1: "len"}},
            opset_version=17,
            dynamo=False,
        )
    quantize_dynamic(str(out / "scores.onnx"), str(out / "scores.int8.onnx"), weight_type=QuantType.QInt8)
    (out / "scores.onnx").unlink()  # serving reads the int8 graph; the folder stays small
    files = {n: file_sha256(out / n) for n in ("embeddings.npy", "scores.int8.onnx")}
    manifest = {
        "format": "citewise-dense/1",
        "kind": "attention-bag",
        "bag_model": os.path.relpath(bag_dir.resolve(), out.resolve()),
        "precision": "int8",
        "config": asdict(model.cfg),
        "files": files,
        "size_bytes": sum((out / n).stat().st_size for n in files),
        **extra,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out
