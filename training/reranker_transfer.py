"""Move a reranker training run to a lent GPU machine and its result back, within the limits of
the trip (issue 16: only the checkout travels, 64 MiB with what it carries; 16 MiB a file back).

- ``pack-base``: the base encoder as int8 rows + fp32 scales (23 MB instead of 91 MB for
  all-MiniLM-L6-v2): only the starting point of fine-tuning, so the rounding (≤ 0.4 % of each
  row's largest weight) is trained away; vectors (biases, LayerNorm) stay fp32.
- ``unpack-base``: that file back into a BERT folder (config.json, model.safetensors, tokenizer).
- ``pack-groups``: training groups with the text no budget can reach cut off (candidates 900
  characters, citing abstracts 600), xz-compressed.
- ``slim`` / ``restore``: a checkpoint's model weights alone in fp16 (45 MB, split in parts
  below 16 MiB) and back into a checkpoint folder that ``reranker_export`` reads.

The CPU recipe needs none of this; it is only the way to and from the GPU.
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
from pathlib import Path

import numpy as np

PART = 15 * 1024 * 1024  # below the 16 MiB per file that comes back
CANDIDATE_CHARS = 900  # > 128 tokens of any candidate text
CITING_ABSTRACT_CHARS = 600  # the query keeps <= 64 tokens, local context first


def pack_base(base: str | Path, out: str | Path) -> Path:
    """int8 per-row copy of a BERT folder's weights (``.npz``) with its config and tokenizer."""
    from safetensors.numpy import load_file

    base, out = Path(base), Path(out)
    tensors = load_file(str(base / "model.safetensors"))
    arrays: dict[str, np.ndarray] = {}
    for name, w in tensors.items():
        w = w.astype(np.float32)
        if w.ndim == 2:
            scale = np.abs(w).max(axis=1, keepdims=True) / 127.0
            scale[scale == 0] = 1.0
            arrays["q8::" + name] = np.round(w / scale).astype(np.int8)
            arrays["sc::" + name] = scale.astype(np.float32)
        else:
            arrays["f32::" + name] = w
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "weights.npz", **arrays)
    for f in (
        "config.json",
        "tokenizer.json",
        "vocab.txt",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ):
        if (base / f).exists():
            shutil.copy(base / f, out / f)
    return out


def unpack_base(packed: str | Path, out: str | Path) -> Path:
    """A BERT folder from :func:`pack_base`'s output."""
    from safetensors.numpy import save_file

    packed, out = Path(packed), Path(out)
    z = np.load(packed / "weights.npz")
    tensors: dict[str, np.ndarray] = {}
    for key in z.files:
        kind, name = key.split("::", 1)
        if kind == "q8":
            tensors[name] = z[key].astype(np.float32) * z["sc::" + name]
        elif kind == "f32":
            tensors[name] = z[key]
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(out / "model.safetensors"))
    for f in packed.iterdir():
        if f.name != "weights.npz":
            shutil.copy(f, out / f.name)
    return out


def pack_groups(paths: list[str], out: str | Path) -> int:
    """Training groups of several files into one ``.jsonl.xz``, texts cut where no budget reaches."""
    n = 0
    with lzma.open(out, "wt", encoding="utf-8", preset=9) as fh:
        for path in paths:
            with open(path, encoding="utf-8") as src:
                for line in src:
                    if not line.strip():
                        continue
                    g = json.loads(line)
                    g["pos"] = g["pos"][:CANDIDATE_CHARS]
                    g["negs"] = [t[:CANDIDATE_CHARS] for t in g["negs"]]
                    g["citing_abstract"] = g["citing_abstract"][:CITING_ABSTRACT_CHARS]
                    fh.write(json.dumps(g, ensure_ascii=False) + "\n")
                    n += 1
    return n


def slim(ckpt: str | Path, out: str | Path) -> list[Path]:
    """The checkpoint's model weights in fp16, in parts below :data:`PART`, plus its small files."""
    import io

    import torch

    ckpt, out = Path(ckpt), Path(out)
    state = torch.load(ckpt / "state.pt", map_location="cpu", weights_only=False)["model"]
    buf = io.BytesIO()
    torch.save({k: v.half() if v.is_floating_point() else v for k, v in state.items()}, buf)
    data = buf.getvalue()
    out.mkdir(parents=True, exist_ok=True)
    parts = []
    for i in range(0, len(data), PART):
        p = out / f"model.fp16.pt.part{i // PART}"
        p.write_bytes(data[i : i + PART])
        parts.append(p)
    meta = {f: (ckpt / f).read_text() for f in ("config.json", "train_config.json", "progress.json")}
    meta["tokenizer.json"] = (ckpt / "tokenizer.json").read_text()
    with lzma.open(out / "meta.json.xz", "wt", encoding="utf-8") as fh:
        json.dump(meta, fh)
    return parts


def restore(slim_dir: str | Path, out: str | Path) -> Path:
    """A checkpoint folder (``state.pt`` with fp32 weights, config, tokenizer) from :func:`slim`."""
    import io

    import torch

    slim_dir, out = Path(slim_dir), Path(out)
    parts = sorted(slim_dir.glob("model.fp16.pt.part*"), key=lambda p: int(p.name.rsplit("part", 1)[1]))
    if not parts:
        raise SystemExit(f"no model.fp16.pt.part* files in {slim_dir}")
    state = torch.load(io.BytesIO(b"".join(p.read_bytes() for p in parts)), weights_only=False)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(
        {"model": {k: v.float() if v.is_floating_point() else v for k, v in state.items()}}, out / "state.pt"
    )
    with lzma.open(slim_dir / "meta.json.xz", "rt", encoding="utf-8") as fh:
        meta = json.load(fh)
    for name, text in meta.items():
        (out / name).write_text(text, encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, args in {
        "pack-base": ("base", "out"),
        "unpack-base": ("packed", "out"),
        "slim": ("checkpoint", "out"),
        "restore": ("slim_dir", "out"),
    }.items():
        p = sub.add_parser(name)
        for a in args:
            p.add_argument(a)
    g = sub.add_parser("pack-groups")
    g.add_argument("out")
    g.add_argument("groups", nargs="+")
    a = ap.parse_args(argv)
    if a.cmd == "pack-base":
        print(pack_base(a.base, a.out))
    elif a.cmd == "unpack-base":
        print(unpack_base(a.packed, a.out))
    elif a.cmd == "pack-groups":
        print(f"{pack_groups(a.groups, a.out)} groups -> {a.out}")
    elif a.cmd == "slim":
        print("\n".join(str(p) for p in slim(a.checkpoint, a.out)))
    else:
        print(restore(a.slim_dir, a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
