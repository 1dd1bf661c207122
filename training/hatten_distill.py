"""HAtten distilled from the bi-encoder: the fast paper encoder of the prefetch (issue 26).

Why distillation: the fine-tuned bi-encoder's paper vectors measured best fused into the prefetch,
but it embeds ~130 papers/s on two cores; the static bag of word pieces (``models/static``) embeds
3,400 papers/s and keeps less of it (cosine 0.885 on held-out papers). HAtten (paper 004: word
embeddings, a light transformer per field, hierarchical attention pooling) reads word order and
context, which a bag cannot. Trained on labels it never beat BM25 here (``docs/hatten.md``); as a
*student* it needs no labels: the targets are the bi-encoder's vectors of every paper of the
ACM-CR and ACL stores (no citing sentence, nothing of the dev sets is read).

The student is the static bag plus HAtten: ``normalise(bag(paper) + head(hatten(paper)))``, the
head started at zero, so the untrained student *is* the bag and training only has to add what the
bag misses. Its word-piece embeddings are the bag's own rows (frozen), projected to ``d_model``.
Queries stay with the bi-encoder (the teacher), as for the static model.

    python -m training.hatten_distill train --store /tmp/acm.sqlite --store /tmp/acl.sqlite \\
        --out runs/hatten-distill            # resumes from runs/hatten-distill/ckpt when present
    python -m training.hatten_distill export runs/hatten-distill --out models/hatten
    python -m training.hatten_distill eval models/hatten --store /tmp/acm.sqlite --dump acm_dump.jsonl

Papers whose row id is divisible by 5 are held out (as for the static model) and report agreement.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from citewise.models.biencoder_onnx import paper_text
from citewise.models.static_encoder import StaticEncoder
from citewise.models.vocab import Vocab
from training.hatten import ABSTRACT, TITLE, Hatten, HattenConfig
from training.hatten_reweight import ReweightStudent
from training.static_distill import distill_loss, teacher_records

STATIC = Path(__file__).resolve().parents[1] / "models" / "static"


@dataclass
class DistillSet:
    """Every paper of the training stores: title and abstract word pieces, the bag's vector, the
    teacher's vector, held out or not."""

    titles: list[np.ndarray]
    abstracts: list[np.ndarray]
    pieces: list[np.ndarray]  # title. abstract as the bag reads it (attempt 2)
    bag: np.ndarray
    targets: np.ndarray
    held: np.ndarray

    @classmethod
    def load(cls, stores: list[Path], teacher: Path, bag: StaticEncoder, cfg: HattenConfig) -> DistillSet:
        vocab = Vocab(bag.dir / "tokenizer.json")
        titles: list[np.ndarray] = []
        abstracts: list[np.ndarray] = []
        pieces: list[np.ndarray] = []
        bags, targets, held = [], [], []
        for sp in stores:
            ids, papers, vecs = teacher_records(sp, teacher)
            t = [p.title for p in papers]
            a = [p.abstract for p in papers]
            titles += vocab.encode(t, cfg.max_title)
            abstracts += vocab.encode(a, cfg.max_abstract)
            texts = [paper_text(x, y) for x, y in zip(t, a, strict=True)]
            pieces += [np.asarray(e.ids, dtype=np.int64) for e in bag.tok.encode_batch(texts)]
            bags.append(bag.encode_texts(texts))
            targets.append(vecs)
            held += [i % 5 == 0 for i in ids]
        return cls(titles, abstracts, pieces, np.concatenate(bags), np.concatenate(targets), np.array(held))

    def paragraphs(self, idx: np.ndarray) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
        out = []
        for seqs, kind in ((self.titles, TITLE), (self.abstracts, ABSTRACT)):
            ids, mask = Vocab.pad([seqs[i] for i in idx])
            out.append((torch.from_numpy(ids), torch.from_numpy(mask), kind))
        return out


def student_config(bag: StaticEncoder, d_model: int = 128) -> HattenConfig:
    """Sizes of the student: the bag's vocabulary and dimension, a small transformer."""
    return HattenConfig(
        vocab_size=int(bag.table.shape[0]),
        emb_dim=int(bag.table.shape[1]),
        d_model=d_model,
        n_heads=4,
        ff_dim=2 * d_model,
        pool_heads=4,
        freeze_emb=True,
        max_title=32,
        max_abstract=128,
        out_dim=bag.dim,
    )


def new_student(bag: StaticEncoder, cfg: HattenConfig) -> Hatten:
    """HAtten with the bag's rows (each scaled to unit length) as its frozen word embeddings."""
    model = Hatten(cfg)
    rows = bag.table.astype(np.float32)
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)
    rows[0] = 0.0
    with torch.no_grad():
        model.emb.weight.copy_(torch.from_numpy(rows))
    return model


def _student(folder: Path, s: Settings, bag: StaticEncoder, resume: bool) -> Hatten | ReweightStudent:
    """The student of ``s.student``, from its checkpoint when resuming."""
    if s.student in ("reweight", "reweight-rows"):
        rows = s.student == "reweight-rows"
        return (
            ReweightStudent.load(folder, bag)
            if resume
            else ReweightStudent.new(bag, s.d_model, train_rows=rows)
        )
    return Hatten.load(folder)[0] if resume else new_student(bag, student_config(bag, s.d_model))


def vectors(model: Hatten | ReweightStudent, data: DistillSet, idx: np.ndarray) -> torch.Tensor:
    """The student's normalised paper vectors: bag + head(HAtten) (attempt 1), or the bag's rows
    re-weighted by HAtten's attention (attempt 2)."""
    if isinstance(model, ReweightStudent):
        ids, mask = Vocab.pad([data.pieces[i] for i in idx])
        return model(torch.from_numpy(ids), torch.from_numpy(mask))
    raw = model.doc_raw(*model.paragraphs(data.paragraphs(idx)))
    return F.normalize(raw + torch.from_numpy(data.bag[idx]), dim=-1)


def loss_of(model: Hatten, data: DistillSet, idx: np.ndarray, tau: float, contrast: float) -> torch.Tensor:
    """The static model's :func:`training.static_distill.distill_loss` on the student's vectors."""
    return distill_loss(vectors(model, data, idx), torch.from_numpy(data.targets[idx]), tau, contrast)


def agreement(model: Hatten, data: DistillSet, idx: np.ndarray) -> float:
    """Mean cosine with the teacher over ``idx`` (eval mode, batches of 512)."""
    model.eval()
    with torch.no_grad():
        cos = [
            (vectors(model, data, part) * torch.from_numpy(data.targets[part])).sum(-1)
            for part in np.array_split(idx, max(1, len(idx) // 512))
        ]
    model.train()
    return float(torch.cat(cos).mean())


@dataclass
class Settings:
    epochs: float = 3.0
    batch: int = 128
    lr: float = 1e-3
    tau: float = 0.05
    contrast: float = 0.2
    d_model: int = 128
    seed: int = 0
    save_every: int = 300
    student: str = (
        "residual"  # attempt 1; "reweight": attempt 2 (training/hatten_reweight.py); "reweight-rows": 3
    )
    lr_rows: float = 0.01  # attempt 3: SparseAdam on the bag's rows
    stop_after: int = 0  # > 0: stop (checkpointed) after this many steps of this run; run again to go on


class Optimizers:
    """AdamW for the dense weights, SparseAdam for word rows trained as sparse embeddings (attempt 3:
    only the rows a batch reads change, as in training.static_distill); each group keeps its
    ``base_lr`` for the schedule."""

    def __init__(self, model: torch.nn.Module, s: Settings) -> None:
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        sparse = [p for n, p in named if n.startswith("rows_emb")]
        self.opts: list[torch.optim.Optimizer] = [
            torch.optim.AdamW(
                [p for n, p in named if not n.startswith("rows_emb")], lr=s.lr, weight_decay=0.01
            )
        ]
        if sparse:
            self.opts.append(torch.optim.SparseAdam(sparse, lr=s.lr_rows))
        for opt, base in zip(self.opts, (s.lr, s.lr_rows), strict=False):
            for g in opt.param_groups:
                g["base_lr"] = base

    @property
    def param_groups(self) -> list[dict]:
        return [g for opt in self.opts for g in opt.param_groups]

    def zero_grad(self) -> None:
        for opt in self.opts:
            opt.zero_grad()

    def step(self) -> None:
        for opt in self.opts:
            opt.step()

    def state_dict(self) -> list[dict]:
        return [opt.state_dict() for opt in self.opts]

    def load_state_dict(self, states: list[dict] | dict) -> None:
        for opt, state in zip(self.opts, states if isinstance(states, list) else [states], strict=True):
            opt.load_state_dict(state)


def _checkpoint(out: Path, model: torch.nn.Module, opt: Optimizers, state: dict) -> None:
    """Model (``out/ckpt``, the folder :func:`training.hatten_export.export` reads) + optimiser and
    position, written through a temporary file: a run killed at any moment resumes."""
    model.save(out / "ckpt", extra={"step": state["step"], "log": state["log"]})
    tmp = out / "train_state.pt.tmp"
    torch.save({"optim": opt.state_dict(), **state}, tmp)
    tmp.replace(out / "train_state.pt")


def train(stores: list[Path], out: Path, s: Settings, teacher: Path, bag_dir: Path = STATIC) -> dict:
    """Fit the student (resuming from ``out`` when a checkpoint is there); returns the log."""
    torch.manual_seed(s.seed)
    torch.set_num_threads(2)
    bag = StaticEncoder(bag_dir)
    out.mkdir(parents=True, exist_ok=True)
    resume = (out / "train_state.pt").exists()
    model = _student(out / "ckpt", s, bag, resume)
    data = DistillSet.load(stores, teacher, bag, student_config(bag, s.d_model))
    opt = Optimizers(model, s)
    state = {"step": 0, "log": [], "settings": s.__dict__, "stores": [str(p) for p in stores]}
    if resume:
        saved = torch.load(out / "train_state.pt", weights_only=False)
        opt.load_state_dict(saved.pop("optim"))
        state.update(saved)
    train_idx, test_idx = np.flatnonzero(~data.held), np.flatnonzero(data.held)
    per_epoch = math.ceil(len(train_idx) / s.batch)
    total = int(s.epochs * per_epoch)
    t0, end = time.time(), total if not s.stop_after else min(total, state["step"] + s.stop_after)
    if not state["log"]:
        state["log"].append({"step": 0, "heldout_cos": agreement(model, data, test_idx[:20000])})
        print(json.dumps(state["log"][-1]), flush=True)
    while state["step"] < end:
        step = state["step"]
        epoch, pos = divmod(step, per_epoch)
        order = np.random.default_rng(s.seed + epoch).permutation(train_idx)  # same order on resume
        idx = order[pos * s.batch : (pos + 1) * s.batch]
        for g in opt.param_groups:  # warm-up 100 steps, then linear decay to zero
            g["lr"] = g["base_lr"] * min(1.0, (step + 1) / 100) * (1 - step / total)
        loss = loss_of(model, data, idx, s.tau, s.contrast)
        opt.zero_grad()
        loss.backward()
        opt.step()
        state["step"] = step + 1
        if state["step"] % s.save_every == 0 or state["step"] in (end, total):
            row = {"step": state["step"], "epoch": round(state["step"] / per_epoch, 2), "loss": loss.item()}
            row.update(heldout_cos=agreement(model, data, test_idx[:20000]))
            row.update(minutes_this_run=round((time.time() - t0) / 60, 1))
            state["log"].append(row)
            print(json.dumps(row), flush=True)
            _checkpoint(out, model, opt, state)
    if state["step"] < total:
        return state
    final = {"heldout_cos_all": agreement(model, data, test_idx), "papers": len(data.held)}
    final.update(heldout_papers=int(data.held.sum()), steps=total)
    state["final"] = final
    _checkpoint(out, model, opt, state)
    return state


def export(run: Path, out: Path, bag_dir: Path = STATIC) -> Path:
    """The serving folder: the student's graph (int8) over the bag, naming the bag (and through it
    the query model) relative to itself: HAtten's two graphs (attempt 1) or the score graph of
    :class:`citewise.models.attention_bag.AttentionBagEncoder` (attempt 2)."""
    from training.hatten_export import export as export_graphs

    state = torch.load(run / "train_state.pt", weights_only=False)
    bag = json.loads((bag_dir / "manifest.json").read_text())
    extra = {
        "format": "citewise-dense/1",
        "bag_model": os.path.relpath(bag_dir.resolve(), out.resolve()),
        "fuse_by_default": True,
        "fuse_weight": bag.get("fuse_weight", 2.0),
        "embed_by_default": True,
        "training": {k: state[k] for k in ("settings", "stores", "log", "final") if k in state},
    }
    if state["settings"].get("student") == "reweight":
        from training import hatten_reweight

        extra["base"] = (
            "models/static's rows and weights, re-weighted per context by one transformer layer (training/hatten_reweight.py)"
        )
        return hatten_reweight.export(run, out, bag_dir, extra)
    extra["base"] = (
        "HAtten (paper 004) distilled from models/dense's paper vectors on top of models/static's "
        "bag of word pieces (training/hatten_distill.py)"
    )
    return export_graphs(run / "ckpt", bag_dir / "tokenizer.json", out, manifest_extra=extra)


def evaluate(model_dir: Path, store: Path, dump: Path, teacher: Path, k: int = 200) -> dict:
    """The exported student against its teacher on a dev dump (agreement, dense alone, fused with
    the prefetch; see :func:`training.static_distill.fusion_report`), and its papers/s here."""
    from citewise.models.dense_index import make_encoder
    from training.static_distill import fusion_report

    ids, papers, vecs = teacher_records(store, teacher)
    student = make_encoder(model_dir)
    t0 = time.time()
    mine = student.encode_papers(papers)
    seconds = time.time() - t0
    uids = [p.uid.split(":", 1)[-1] for p in papers]
    result = {"papers": len(ids), "student_papers_per_s": round(len(ids) / seconds, 1)}
    result.update(fusion_report(model_dir, dump, uids, vecs, mine, student.bag.queries, k))
    return result


def evaluate_run(run: Path, store: Path, dump: Path, teacher: Path, k: int = 200) -> dict:
    """As :func:`evaluate`, from a training run's checkpoint (torch, fp32) instead of an exported
    folder: for students no serving folder exists for (attempt 3's trained rows)."""
    from training.static_distill import fusion_report

    settings = Settings(**torch.load(run / "train_state.pt", weights_only=False)["settings"])
    bag = StaticEncoder(STATIC)
    model = _student(run / "ckpt", settings, bag, resume=True).eval()
    _, papers, vecs = teacher_records(store, teacher)
    data = DistillSet.load([store], teacher, bag, student_config(bag, settings.d_model))
    with torch.no_grad():
        mine = torch.cat([vectors(model, data, part) for part in np.array_split(np.arange(len(papers)), 256)])
    uids = [p.uid.split(":", 1)[-1] for p in papers]
    return {"papers": len(papers), **fusion_report(run, dump, uids, vecs, mine.numpy(), bag.queries, k)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.hatten_distill", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="fit (or resume) the student")
    t.add_argument(
        "--store", type=Path, action="append", required=True, help="a store embedded by the teacher"
    )
    t.add_argument("--out", type=Path, required=True)
    for name, value in Settings().__dict__.items():
        t.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    x = sub.add_parser("export", help="write the serving folder (int8 ONNX)")
    x.add_argument("run", type=Path)
    x.add_argument("--out", type=Path, required=True)
    e = sub.add_parser("eval", help="agreement and offline fusion on a dev dump (a model folder or a run)")
    e.add_argument("model", type=Path)
    e.add_argument("--store", type=Path, required=True)
    e.add_argument("--dump", type=Path, required=True)
    for p in (t, e):
        p.add_argument("--teacher", type=Path, default=None, help="bi-encoder folder (default: models/dense)")
    for p in (t, x):
        p.add_argument(
            "--bag", type=Path, default=STATIC, help="static model folder (default: models/static)"
        )
    a = ap.parse_args(argv)
    teacher = getattr(a, "teacher", None) or Path(__file__).resolve().parents[1] / "models" / "dense"
    if a.cmd == "train":
        s = Settings(**{n: getattr(a, n) for n in Settings().__dict__})
        print(json.dumps(train(a.store, a.out, s, teacher, a.bag).get("final")))
    elif a.cmd == "export":
        print(export(a.run, a.out, a.bag))
    elif (a.model / "train_state.pt").exists():  # a run folder: its checkpoint, in torch
        print(json.dumps(evaluate_run(a.model, a.store, a.dump, teacher), indent=2))
    else:
        print(json.dumps(evaluate(a.model, a.store, a.dump, teacher), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
