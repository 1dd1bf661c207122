"""Export a trained HAtten checkpoint to the serving folder: ONNX graphs, int8 copies, table, manifest.

Layout of a model folder (what :class:`citewise.models.hatten_onnx.HattenEncoder` loads):
- ``tokenizer.json``: the word tokenizer (``tokenizers``, no torch);
- ``embeddings.npy``: the token table already projected to ``d_model`` (float16, row 0 = padding);
- ``paragraph.onnx`` / ``document.onnx``: the two encoder levels in fp32, with dynamic batch and length
  axes; ``paragraph.int8.onnx`` / ``document.int8.onnx``: the same after onnxruntime dynamic int8
  quantisation (weights int8, activations quantised on the fly), which serving uses by default;
- ``manifest.json``: sizes, base vectors, training data and command, dev metrics, file hashes.

Why two graphs and a table outside them: queries (3 fields) and papers (2 fields) share all weights;
one paragraph graph + one document graph serve any field combination, and keeping the shared table
once keeps the folder small.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from training.hatten import Hatten


class _Paragraph(nn.Module):
    """Input: looked-up table rows; with a token bias its last column is the pooling prior."""

    def __init__(self, model: Hatten) -> None:
        super().__init__()
        self.para = model.para
        self.d = model.cfg.d_model
        self.bias = model.tok_bias is not None

    def forward(self, emb: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.bias:
            return self.para(emb[:, :, : self.d], mask, emb[:, :, self.d])
        return self.para(emb, mask)


class _Document(nn.Module):
    def __init__(self, model: Hatten) -> None:
        super().__init__()
        self.model = model

    def forward(self, paras: torch.Tensor, types: torch.Tensor, pmask: torch.Tensor) -> torch.Tensor:
        # Unnormalised: serving normalises (after adding the skip path of a distilled model).
        return self.model.doc_raw(paras, types, pmask)


def file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _export_graphs(model: Hatten, out: Path, opset: int) -> None:
    """Write ``paragraph.onnx`` and ``document.onnx`` (fp32). The example inputs only fix ranks and
    dtypes: batch, length and paragraph-count axes are dynamic, so one graph serves any field of a
    query or a paper."""
    d = model.cfg.d_model
    width = d + (1 if model.tok_bias is not None else 0)
    with torch.no_grad():
        torch.onnx.export(
            _Paragraph(model),
            (torch.randn(3, 7, width), torch.ones(3, 7)),
            str(out / "paragraph.onnx"),
            input_names=["emb", "mask"],
            output_names=["vec"],
            dynamic_axes={"emb": {0: "n", 1: "len"}, "mask": {0: "n", 1: "len"}, "vec": {0: "n"}},
            opset_version=opset,
            dynamo=False,
        )
        torch.onnx.export(
            _Document(model),
            (torch.randn(3, 2, d), torch.zeros(3, 2, dtype=torch.long), torch.ones(3, 2)),
            str(out / "document.onnx"),
            input_names=["paras", "types", "pmask"],
            output_names=["vec"],
            dynamic_axes={
                "paras": {0: "b", 1: "p"},
                "types": {0: "b", 1: "p"},
                "pmask": {0: "b", 1: "p"},
                "vec": {0: "b"},
            },
            opset_version=opset,
            dynamo=False,
        )


def export(
    checkpoint: str | Path,
    tokenizer: str | Path,
    out: str | Path,
    manifest_extra: dict | None = None,
    opset: int = 17,
) -> Path:
    """Write the serving folder ``out`` from a checkpoint folder (``config.json`` + ``model.pt``)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model, extra = Hatten.load(checkpoint)
    model.eval()
    cfg = model.cfg
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tokenizer, out / "tokenizer.json")
    np.save(out / "embeddings.npy", model.table().numpy().astype(np.float16))
    _export_graphs(model, out, opset)
    for name in ("paragraph", "document"):
        quantize_dynamic(
            str(out / f"{name}.onnx"), str(out / f"{name}.int8.onnx"), weight_type=QuantType.QInt8
        )
    files = [
        "tokenizer.json",
        "embeddings.npy",
        "paragraph.onnx",
        "document.onnx",
        "paragraph.int8.onnx",
        "document.int8.onnx",
    ]
    manifest = {
        "format": "citewise-hatten/1",
        "kind": "hatten",  # which encoder serves the folder (models/dense_index.py: required)
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "precision": "int8",
        "config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
        "checkpoint": {k: v for k, v in extra.items() if k != "optim"},
        "files": {f: file_hash(out / f) for f in files},
        "size_bytes": sum((out / f).stat().st_size for f in files),
    }
    manifest.update(manifest_extra or {})
    old = out / "manifest.json"
    if old.exists():  # keep hand-written fields (training data, command, dev metrics) on re-export
        prev = json.loads(old.read_text())
        for k, v in prev.items():
            manifest.setdefault(k, v)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return out


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Export a HAtten checkpoint to ONNX (fp32 + int8).")
    ap.add_argument("checkpoint", help="checkpoint folder (config.json + model.pt), e.g. RUN/best")
    ap.add_argument("--tokenizer", help="tokenizer.json (default: the run folder's)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    tok = args.tokenizer or str(Path(args.checkpoint).parent / "tokenizer.json")
    print(export(args.checkpoint, tok, args.out))


if __name__ == "__main__":
    main()
