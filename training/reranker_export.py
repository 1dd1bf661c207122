"""Export a reranker checkpoint to ONNX (fp32) and dynamic int8, and check that they agree.

Layout of a served folder (what :class:`citewise.models.reranker.CrossEncoderReranker` loads):
``model.int8.onnx`` (weights int8, activations quantised on the fly by onnxruntime), ``tokenizer.json``,
``manifest.json`` (encode budget, training progress, agreement figures, dev metrics and
``use_by_default``). ``model.onnx`` (fp32, ~90 MB for MiniLM-L6) is written for the agreement check
and for users with more time per query; it is never shipped (files must stay < 40 MB).

Agreement is measured on real pairs (held-out training-split groups, never dev data): the score
difference torch vs fp32 ONNX, and how often int8 keeps fp32's best candidate of a group and the
order of pairs (Kendall-style pairwise agreement). Sensitive layers can stay fp32 (``--keep-fp32``,
node-name substrings, e.g. the classifier head) when that measures better.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from citewise.models.reranker import MODEL_FILE, EncodeSettings, PairEncoder
from training.reranker_data import Group, read_groups
from training.reranker_train import load_checkpoint_model


class _Wrapped(torch.nn.Module):
    def __init__(self, model) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.model(input_ids, attention_mask, token_type_ids)


def _encode_settings(ckpt: Path) -> EncodeSettings:
    cfg = json.loads((ckpt / "train_config.json").read_text())
    return EncodeSettings(cfg["max_len"], cfg["query_max"], cfg["local_max"])


def agreement(model, folder: Path, groups: list[Group], int8_file: str = MODEL_FILE) -> dict[str, float]:
    """torch vs fp32 vs int8 on the pairs of ``groups`` (one batch per group)."""
    import onnxruntime as ort

    model.eval()  # the exporter may leave the module in training mode (dropout on)
    enc = PairEncoder.from_file(
        folder / "tokenizer.json",
        EncodeSettings(**json.loads((folder / "manifest.json").read_text())["encode"]),
    )
    fp32 = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    int8 = ort.InferenceSession(str(folder / int8_file), providers=["CPUExecutionProvider"])
    diffs_fp32, top1, pairwise, total_pairs = [], 0, 0, 0
    t_fp32 = t_int8 = 0.0
    n_pairs = 0
    for g in groups:
        q = enc.query_ids(g.query())
        feeds = enc.batch([enc.pair(q, enc.candidate_ids(t)) for t in [g.pos, *g.negs]])
        with torch.no_grad():
            ref = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).numpy()
        t = time.perf_counter()
        a = fp32.run(None, feeds)[0].reshape(-1)
        t_fp32 += time.perf_counter() - t
        t = time.perf_counter()
        b = int8.run(None, feeds)[0].reshape(-1)
        t_int8 += time.perf_counter() - t
        n_pairs += len(a)
        diffs_fp32.append(float(np.abs(ref - a).max()))
        top1 += int(a.argmax() == b.argmax())
        for i in range(len(a)):
            for j in range(i + 1, len(a)):
                total_pairs += 1
                pairwise += int((a[i] - a[j]) * (b[i] - b[j]) > 0)
    return {
        "groups": len(groups),
        "max_abs_diff_torch_fp32": round(max(diffs_fp32), 6),
        "int8_top1_agreement": round(top1 / len(groups), 4),
        "int8_pairwise_agreement": round(pairwise / max(total_pairs, 1), 4),
        "fp32_pairs_per_s": round(n_pairs / max(t_fp32, 1e-9), 1),
        "int8_pairs_per_s": round(n_pairs / max(t_int8, 1e-9), 1),
    }


def export(
    checkpoint: str | Path,
    out: str | Path,
    *,
    check_groups: list[Group] | None = None,
    keep_fp32: tuple[str, ...] = (),
    opset: int = 17,
) -> Path:
    """Write ``out`` (model.onnx, model.int8.onnx, tokenizer.json, manifest.json) from a checkpoint folder."""
    ckpt = Path(checkpoint)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model = load_checkpoint_model(ckpt)
    # The eager attention exports to plain ONNX ops that every onnxruntime runs.
    model.encoder.config._attn_implementation = "eager"
    shutil.copyfile(ckpt / "tokenizer.json", out / "tokenizer.json")
    _export_fp32(model, out, opset)
    _quantize(out, keep_fp32)
    manifest = _manifest(ckpt, out, keep_fp32)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if check_groups:
        manifest["agreement"] = agreement(model, out, check_groups)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out


def _export_fp32(model, out: Path, opset: int) -> None:
    """The fp32 graph, traced on a batch with padding."""
    # The dummy batch must contain padding: traced on an all-ones mask, the mask code is folded away
    # (transformers skips an all-ones mask) and padded batches would then score wrongly.
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 5:] = 0
    types = torch.zeros(2, 9, dtype=torch.long)
    types[:, 4:] = 1
    dummy = (torch.full((2, 9), 5, dtype=torch.long), mask, types)
    axes = {
        "input_ids": {0: "n", 1: "len"},
        "attention_mask": {0: "n", 1: "len"},
        "token_type_ids": {0: "n", 1: "len"},
        "score": {0: "n"},
    }
    with torch.no_grad():
        torch.onnx.export(
            _Wrapped(model),
            dummy,
            str(out / "model.onnx"),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["score"],
            dynamic_axes=axes,
            opset_version=opset,
            dynamo=False,
        )


def _quantize(out: Path, keep_fp32: tuple[str, ...]) -> None:
    """Dynamic int8 weights; nodes whose names contain a ``keep_fp32`` part stay fp32."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    exclude = []
    if keep_fp32:
        nodes = onnx.load(str(out / "model.onnx")).graph.node
        # The quantizer rewrites a Gemm as "<name>_MatMul" + "<name>_Add" before applying exclusions.
        names = [n.name for n in nodes] + [n.name + "_MatMul" for n in nodes if n.op_type == "Gemm"]
        exclude = [n for n in names if any(k in n for k in keep_fp32)]
    quantize_dynamic(
        str(out / "model.onnx"),
        str(out / MODEL_FILE),
        weight_type=QuantType.QInt8,
        nodes_to_exclude=exclude or None,
    )


def _manifest(ckpt: Path, out: Path, keep_fp32: tuple[str, ...]) -> dict:
    """What the served folder says about itself; dev metrics and ``use_by_default`` come later."""
    enc_settings = _encode_settings(ckpt)
    progress = json.loads((ckpt / "progress.json").read_text())
    cfg = json.loads((ckpt / "train_config.json").read_text())
    manifest = {
        "format": "citewise-reranker/1",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "base": cfg.get("base", ""),
        "loss": cfg.get("loss"),
        "encode": enc_settings.as_dict(),
        "training": {
            k: progress[k] for k in ("step", "groups_seen", "pairs_seen", "train_seconds") if k in progress
        },
        "keep_fp32": list(keep_fp32),
        "int8_bytes": (out / MODEL_FILE).stat().st_size,
        "dev": {},  # filled by the evaluation (``--metrics``): ACM-CR dev and ACL dev, prefetch vs reranked
        "use_by_default": False,  # set only when the dev metrics say the reranker helps
    }
    return manifest


def update_manifest(folder: str | Path, **fields) -> dict:
    """Merge fields into a served folder's manifest (dev metrics, ``use_by_default``)."""
    path = Path(folder) / "manifest.json"
    manifest = json.loads(path.read_text())
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(manifest.get(key), dict):
            manifest[key].update(value)
        else:
            manifest[key] = value
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def ship(folder: str | Path, target: str | Path) -> Path:
    """Copy the served files (int8 model, tokenizer, manifest; never the fp32 model) to ``target``."""
    folder, target = Path(folder), Path(target)
    target.mkdir(parents=True, exist_ok=True)
    for name in (MODEL_FILE, "tokenizer.json", "manifest.json"):
        shutil.copyfile(folder / name, target / name)
    return target


def main(argv: list[str] | None = None) -> int:
    """``python -m training.reranker_export CKPT --out DIR [--check DATA]``."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", help="checkpoint folder, e.g. checkpoints/reranker/latest")
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", help="training groups file: agreement measured on its held-out head")
    ap.add_argument("--check-groups", type=int, default=48)
    ap.add_argument("--keep-fp32", nargs="*", default=[], help="node-name substrings left unquantised")
    a = ap.parse_args(argv)
    groups = None
    if a.check:
        import random

        cfg = json.loads((Path(a.checkpoint) / "train_config.json").read_text())
        groups = read_groups(a.check)
        random.Random(cfg["seed"]).shuffle(groups)  # the trainer's order: its first val_groups are held out
        groups = groups[: min(a.check_groups, cfg.get("val_groups", a.check_groups))]
    out = export(a.checkpoint, a.out, check_groups=groups, keep_fp32=tuple(a.keep_fp32))
    print(json.dumps(json.loads((out / "manifest.json").read_text()), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
