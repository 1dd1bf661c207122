"""Export a bi-encoder (a BERT folder, e.g. :mod:`training.biencoder`'s output) to the
served layout: ``model.int8.onnx`` (mean pooling and L2 normalisation inside the graph),
``tokenizer.json``, ``manifest.json`` (``"kind": "biencoder"``, file hashes, fusion settings).

    python -m training.biencoder_export BERT_DIR --out models/dense
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import torch

from citewise.indexer.index_files import file_sha256


class _Pooled(torch.nn.Module):
    def __init__(self, bert) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask):
        h = self.bert(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=torch.zeros_like(input_ids)
        ).last_hidden_state
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        v = (h * m).sum(1) / m.sum(1).clamp(min=1)
        return torch.nn.functional.normalize(v, dim=-1)


def export(
    bert_dir: str | Path, out: str | Path, *, fuse_weight: float = 0.5, extra: dict | None = None
) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    src, out = Path(bert_dir), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    bert = AutoModel.from_pretrained(str(src), local_files_only=True)
    bert.config._attn_implementation = "eager"
    bert.eval()
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 5:] = 0  # traced with padding, or the mask code is folded away
    fp32 = out / "model.onnx"
    with torch.no_grad():
        torch.onnx.export(
            _Pooled(bert),
            (torch.full((2, 9), 5, dtype=torch.long), mask),
            str(fp32),
            input_names=["input_ids", "attention_mask"],
            output_names=["embedding"],
            dynamic_axes={
                "input_ids": {0: "n", 1: "len"},
                "attention_mask": {0: "n", 1: "len"},
                "embedding": {0: "n"},
            },
            opset_version=17,
            dynamo=False,
        )
    quantize_dynamic(str(fp32), str(out / "model.int8.onnx"), weight_type=QuantType.QInt8)
    fp32.unlink()  # never shipped (90 MB); the int8 file is what serving reads
    shutil.copyfile(src / "tokenizer.json", out / "tokenizer.json")
    files = ["model.int8.onnx", "tokenizer.json"]
    manifest = {
        "format": "citewise-dense/1",
        "kind": "biencoder",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dim": int(bert.config.hidden_size),
        "query_len": 64,
        "doc_len": 128,
        "precision": "int8",
        "fuse_by_default": False,  # set when the dev metrics say the fusion helps
        "fuse_weight": fuse_weight,
        "files": {f: file_sha256(out / f) for f in files},
        "size_bytes": sum((out / f).stat().st_size for f in files),
        **(extra or {}),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bert_dir")
    ap.add_argument("--out", required=True)
    ap.add_argument("--fuse-weight", type=float, default=0.5)
    a = ap.parse_args(argv)
    print(export(a.bert_dir, a.out, fuse_weight=a.fuse_weight))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
