"""Training settings of the HAtten encoder and the cross-encoder reranker, without torch.

Why a module of their own: the command line builds its ``train`` sub-commands from these
dataclasses, and every ``citewise`` command (``serve`` included) builds the whole parser; with
the settings next to the trainers, each start imported torch (3-4 s here) for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields


@dataclass
class HattenTrainConfig:
    """Everything a run needs; saved in the run folder so a resume uses the same settings."""

    out: str
    store: str = ""  # self-supervised from this store
    release: str = ""  # or supervised from a folder in the authors' layout
    blacklist: str = ""  # DOIs never used for training (ACM-CR citing papers)
    vocab_size: int = 80000
    d_model: int = 64
    n_heads: int = 4
    ff_dim: int = 128
    pool_heads: int = 4
    dropout: float = 0.1
    freeze_emb: bool = False
    token_bias: bool = False  # per-word pooling prior initialised to log idf (attempt 3)
    max_title: int = 24
    max_abstract: int = 128
    max_local: int = 48
    batch: int = 32
    n_hard: int = 4
    k_neg: int = 100
    mine_every: int = 300
    pool_size: int = 40000
    margin: float = 0.1
    inbatch_weight: float = 1.0
    jaccard_min: float = 0.1
    lr: float = 1e-3
    emb_lr: float = 3e-4
    max_minutes: float = 60.0
    max_iters: int = 100000
    checkpoint_minutes: float = 4.0
    seed: int = 0
    threads: int = 2
    val_examples: int = 1000
    extra: dict = field(default_factory=dict)


@dataclass
class RerankerTrainConfig:
    """Everything a run needs; saved in the checkpoint so ``--resume`` needs only ``--out``."""

    out: str
    data: str = ""
    base: str = ""
    init: str = ""  # a checkpoint folder to start from (a run's latest; reranker_unquantize's output)
    loss: str = "listwise"  # or "triplet"
    margin: float = 1.0  # triplet margin
    negatives: int = 7
    groups_per_step: int = 2
    lr: float = 3e-5
    warmup: int = 100
    max_steps: int = 6000
    max_len: int = 160
    query_max: int = 80
    local_max: int = 56
    checkpoint_minutes: float = 5.0
    threads: int = 1
    seed: int = 13
    val_groups: int = 48  # held out from the (training-split) data, for the logged validation accuracy
    log_every: int = 20
    device: str = "auto"  # "cpu", "cuda", or "auto" (cuda when torch sees one; bf16 autocast there)


def add_reranker_arguments(p) -> None:
    """The trainer's flags, generated from :class:`TrainConfig` so the two never drift apart."""
    p.add_argument("--out", required=True, help="run folder (checkpoints in OUT/latest)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/latest (its saved settings win)")
    p.add_argument(
        "--stop-after-steps", type=int, help="stop (with a checkpoint) after this many steps in this call"
    )
    for f in fields(RerankerTrainConfig):
        if f.name == "out":
            continue
        flag = "--" + f.name.replace("_", "-")
        p.add_argument(
            flag,
            type=type(f.default),
            default=None,
            help=f"default {f.default!r}" if f.default != "" else None,
        )
