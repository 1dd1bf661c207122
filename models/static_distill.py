"""Distil the bi-encoder's paper tower into a static bag of word pieces (issue 16, throughput).

Teacher targets are the paper vectors a store already holds (``citewise index --embed`` with the
bi-encoder wrote them beside the store): no labels, no citing sentences, so nothing of ACM-CR dev
or the ACL dev split is read. Papers whose row id is divisible by ``holdout`` are kept out of
training and report how well the student agrees with the teacher on papers it never saw.

The student starts where Model2Vec starts (each word piece's row = the teacher's vector of that
word piece alone, weight = its IDF) and is then fitted to the teacher's paper vectors with a cosine
loss plus an in-batch contrastive term, so a paper's vector is nearer its own teacher vector than
other papers' (what retrieval needs, not only the average angle).

    python -m citewise.models.static_distill train --store data/acm-cr.sqlite --store data/acl.sqlite \\
        --out runs/static1
    python -m citewise.models.static_distill eval runs/static1 --store data/acm-cr.sqlite \\
        --dump data/eval/acm_dump.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from citewise.indexer.store import Store

from .biencoder_onnx import BiEncoder, paper_text, query_text
from .dense_index import default_model_dir
from .static_encoder import StaticEncoder


def teacher_vectors(store_path: Path, model_dir: Path) -> tuple[list[int], list[str], list[str], np.ndarray]:
    """(row ids, uids, paper texts, teacher vectors) for every paper the store's embedding folder
    holds for the bi-encoder in ``model_dir`` (last row wins when a paper was re-embedded)."""
    folder = store_path.with_name(store_path.name + ".hatten")
    meta = json.loads((folder / "meta.json").read_text())
    enc = BiEncoder(model_dir)
    if meta.get("model_hash") != enc.model_hash:
        raise SystemExit(
            f"{folder}: embedded with another model; run citewise index --embed with {model_dir}"
        )
    dim = enc.dim
    rows = np.fromfile(folder / "rows.i64", dtype=np.int64).reshape(-1, 2)
    vecs = np.fromfile(folder / "emb.f32", dtype=np.float32).reshape(-1, dim)
    n = min(len(rows), len(vecs))
    last = {int(pid): i for i, pid in enumerate(rows[:n, 0])}
    store = Store(store_path, create=False)
    papers = store.get_many(sorted(last))
    ids = [pid for pid in sorted(last) if pid in papers]
    texts = [paper_text(papers[p].title, papers[p].abstract) for p in ids]
    uids = [papers[p].uid.split(":", 1)[-1] for p in ids]  # the dev files name papers without the prefix
    store.close()
    return ids, uids, texts, vecs[[last[p] for p in ids]]


def save_int8(out: Path, table: np.ndarray, weights: np.ndarray) -> None:
    """Rows as int8 with one scale each, the scale folded into the word piece's weight (the bag
    multiplies them anyway): a quarter of the float32 table, no extra work when embedding."""
    scale = np.maximum(np.abs(table).max(axis=1), 1e-12) / 127.0
    np.save(out / "table.int8.npy", np.round(table / scale[:, None]).astype(np.int8))
    np.save(out / "weights.f32.npy", (weights * scale).astype(np.float32))


def token_init(enc: BiEncoder, vocab: int) -> np.ndarray:
    """Each word piece's vector as the teacher sees it alone (``[CLS] piece [SEP]``)."""
    cls, sep = enc.tok.token_to_id("[CLS]"), enc.tok.token_to_id("[SEP]")
    out = np.zeros((vocab, enc.dim), dtype=np.float32)
    for s in range(0, vocab, 512):
        ks = range(s, min(vocab, s + 512))
        out[s : s + len(ks)] = enc._run([[cls, k, sep] for k in ks])
    return out


def train(
    stores: list[Path],
    out: Path,
    *,
    model_dir: Path,
    epochs: int = 6,
    batch: int = 256,
    lr: float = 0.05,
    tau: float = 0.05,
    contrast: float = 0.2,
    holdout: int = 5,
    seed: int = 0,
    groups: list[Path] = (),
    retrieval: float = 1.0,
) -> dict:
    """Fit the student to the teacher's paper vectors (and, with ``groups``, to rank each training
    sentence's cited paper above its hard negative under the teacher's query vector)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    enc = BiEncoder(model_dir)
    enc.tok.enable_truncation(enc.doc_len)
    seqs: list[list[int]] = []
    targets: list[np.ndarray] = []
    held: list[bool] = []
    for sp in stores:
        ids, _, texts, vecs = teacher_vectors(sp, model_dir)
        seqs += [e.ids for e in enc.tok.encode_batch(texts)]
        targets.append(vecs)
        held += [i % holdout == 0 for i in ids]
    y = torch.from_numpy(np.concatenate(targets))
    vocab = enc.tok.get_vocab_size()
    df = np.zeros(vocab)
    for s in seqs:
        df[np.unique(s)] += 1
    idf = np.log((1 + len(seqs)) / (1 + df)).astype(np.float32)
    t0 = time.time()
    table = nn.EmbeddingBag(vocab, enc.dim, mode="sum", sparse=True)
    weight = nn.Embedding(vocab, 1, sparse=True)
    table.weight.data = torch.from_numpy(token_init(enc, vocab))
    weight.weight.data = torch.from_numpy(idf[:, None])
    init_s = time.time() - t0
    # Retrieval pairs: the teacher's query vector, the cited paper and one hard negative.
    g_q, g_pos, g_negs = np.zeros((0, enc.dim), np.float32), [], []
    if groups:
        from .reranker_data import read_groups

        gs = [g for path in groups for g in read_groups(path)]
        g_q = enc.encode_texts([query_text(g.local, g.citing_title) for g in gs], enc.query_len)
        g_pos = [e.ids for e in enc.tok.encode_batch([g.pos for g in gs])]
        g_negs = [[e.ids for e in enc.tok.encode_batch(list(g.negs))] for g in gs]
        print(json.dumps({"groups": len(gs), "query_s": round(time.time() - t0 - init_s, 1)}), flush=True)
    gq = torch.from_numpy(g_q)
    opt = torch.optim.SparseAdam([table.weight, weight.weight], lr=lr)
    train_idx = np.array([i for i, h in enumerate(held) if not h])
    test_idx = np.array([i for i, h in enumerate(held) if h])

    def bag(part: list[list[int]]) -> torch.Tensor:
        flat = torch.tensor([t for s in part for t in s], dtype=torch.long)
        offsets = torch.tensor(np.cumsum([0] + [len(s) for s in part[:-1]]), dtype=torch.long)
        v = table(flat, offsets, per_sample_weights=weight(flat).squeeze(-1))
        return nn.functional.normalize(v, dim=-1)

    def embed(idx: np.ndarray) -> torch.Tensor:
        flat = torch.tensor([t for i in idx for t in seqs[i]], dtype=torch.long)
        offsets = torch.tensor(np.cumsum([0] + [len(seqs[i]) for i in idx[:-1]]), dtype=torch.long)
        v = table(flat, offsets, per_sample_weights=weight(flat).squeeze(-1))
        return nn.functional.normalize(v, dim=-1)

    def agreement(idx: np.ndarray) -> float:
        with torch.no_grad():
            cos = [
                (embed(idx[s : s + 4096]) * y[idx[s : s + 4096]]).sum(-1) for s in range(0, len(idx), 4096)
            ]
        return float(torch.cat(cos).mean())

    log = [{"epoch": 0, "train_cos": agreement(train_idx[:20000]), "heldout_cos": agreement(test_idx)}]
    print(json.dumps(log[-1]), flush=True)
    rng = np.random.default_rng(seed)
    steps = epochs * math.ceil(len(train_idx) / batch)
    step = 0
    for ep in range(1, epochs + 1):
        order = rng.permutation(train_idx)
        for s in range(0, len(order), batch):
            for g in opt.param_groups:  # linear decay: the last epochs settle
                g["lr"] = lr * (1 - step / steps)
            idx = order[s : s + batch]
            v, t = embed(idx), y[idx]
            loss = (1 - (v * t).sum(-1)).mean()
            if contrast:
                logits = v @ t.T / tau
                loss = loss + contrast * nn.functional.cross_entropy(logits, torch.arange(len(idx)))
            if len(gq) and retrieval:
                gi = rng.integers(0, len(gq), batch // 2)
                docs = [g_pos[i] for i in gi] + [g_negs[i][rng.integers(len(g_negs[i]))] for i in gi]
                logits = gq[gi] @ bag(docs).T / tau
                loss = loss + retrieval * nn.functional.cross_entropy(logits, torch.arange(len(gi)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
        log.append(
            {
                "epoch": ep,
                "train_cos": agreement(train_idx[:20000]),
                "heldout_cos": agreement(test_idx),
                "minutes": round((time.time() - t0) / 60, 1),
            }
        )
        print(json.dumps(log[-1]), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    save_int8(out, table.weight.data.numpy(), weight.weight.data.numpy()[:, 0])
    (out / "tokenizer.json").write_bytes((model_dir / "tokenizer.json").read_bytes())
    from citewise.indexer.index_files import file_sha256

    files = {n: file_sha256(out / n) for n in ("table.int8.npy", "weights.f32.npy", "tokenizer.json")}
    manifest = {
        "format": "citewise-dense/1",
        "kind": "static",
        "query_model": os.path.relpath(model_dir.resolve(), out.resolve()),
        "dim": enc.dim,
        "doc_len": enc.doc_len,
        "files": files,
        "training": {
            "stores": [str(s) for s in stores],
            "papers": len(seqs),
            "heldout_every": holdout,
            "epochs": epochs,
            "batch": batch,
            "lr": lr,
            "tau": tau,
            "contrast": contrast,
            "groups": [str(g) for g in groups],
            "retrieval": retrieval,
            "init_s": round(init_s, 1),
            "log": log,
        },
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def evaluate(model: Path, store: Path, dump: Path, *, model_dir: Path, k: int = 200) -> dict:
    """Dense alone and fused with the prefetch on a dev dump, the student against its teacher
    (same queries, same query encoder; only the paper vectors differ)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from eval_dense_fusion import main as fusion

    ids, uids, texts, teacher = teacher_vectors(store, model_dir)
    student = StaticEncoder(model)
    t0 = time.time()
    vecs = student.encode_texts(texts)
    embed_s = time.time() - t0
    rows = [json.loads(line) for line in dump.read_text().splitlines() if line.strip()]
    q = student.queries.encode_texts(
        [query_text(r["query"]["local"], r["query"]["citing_title"]) for r in rows], student.queries.query_len
    )
    result = {
        "papers": len(ids),
        "student_papers_per_s": round(len(ids) / embed_s, 1),
        "agreement_cos": round(float((vecs * teacher).sum(1).mean()), 4),
    }
    for name, emb in (("teacher", teacher), ("student", vecs)):
        top = np.argsort(-(q @ emb.T), axis=1)[:, :k]
        path = model / f"dense_{name}_{dump.stem}.jsonl"
        with open(path, "w") as fh:
            for r, t in zip(rows, top, strict=True):
                fh.write(json.dumps({"qid": r["qid"], "dense": [uids[j] for j in t]}) + "\n")
        result[name] = fusion(str(dump), str(path), weights=(0.5, 1.0, 2.0))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m citewise.models.static_distill", description=__doc__.split("\n")[0]
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--store", type=Path, action="append", required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--epochs", type=int, default=6)
    t.add_argument("--lr", type=float, default=0.05)
    t.add_argument("--contrast", type=float, default=0.2)
    t.add_argument(
        "--groups", type=Path, action="append", default=[], help="reranker training groups (JSON Lines)"
    )
    t.add_argument("--retrieval", type=float, default=1.0, help="weight of the groups' ranking loss")
    e = sub.add_parser("eval")
    e.add_argument("model", type=Path)
    e.add_argument("--store", type=Path, required=True)
    e.add_argument("--dump", type=Path, required=True)
    for p in (t, e):
        p.add_argument(
            "--teacher", type=Path, default=None, help="bi-encoder folder (default: the shipped one)"
        )
    a = ap.parse_args(argv)
    teacher = a.teacher or default_model_dir()
    if a.cmd == "train":
        m = train(
            a.store,
            a.out,
            model_dir=teacher,
            epochs=a.epochs,
            lr=a.lr,
            contrast=a.contrast,
            groups=a.groups,
            retrieval=a.retrieval,
        )
        print(json.dumps(m["training"]["log"][-1]))
    else:
        print(json.dumps(evaluate(a.model, a.store, a.dump, model_dir=teacher), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
