"""Distil the bi-encoder's paper tower into a static bag of word pieces (issue 16, throughput).

Teacher targets are the paper vectors a store already holds (``citewise index --embed`` with the
bi-encoder wrote them beside the store): no labels, no citing sentences, so nothing of ACM-CR dev
or the ACL dev split is read. Papers whose row id is divisible by ``holdout`` are kept out of
training and report how well the student agrees with the teacher on papers it never saw.

The student starts where Model2Vec starts (each word piece's row = the teacher's vector of that
word piece alone, weight = its IDF) and is then fitted to the teacher's paper vectors with a cosine
loss plus an in-batch contrastive term, so a paper's vector is nearer its own teacher vector than
other papers' (what retrieval needs, not only the average angle).

    python -m training.static_distill train --store data/acm-cr.sqlite --store data/acl.sqlite \\
        --out runs/static1
    python -m training.static_distill eval runs/static1 --store data/acm-cr.sqlite \\
        --dump data/eval/acm_dump.jsonl
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

from citewise.evaluation.dense_fusion import fusion_metrics
from citewise.indexer.ann import AnnIndex
from citewise.indexer.store import Store
from citewise.models.biencoder_onnx import BiEncoder, paper_text, query_text
from citewise.models.dense_index import default_model_dir
from citewise.models.static_encoder import StaticEncoder


def teacher_records(store_path: Path, model_dir: Path) -> tuple[list[int], list, np.ndarray]:
    """(row ids, paper records, teacher vectors) of the papers whose bi-encoder vectors (from
    ``model_dir``) the store's embedding index holds and are current, in row-id order."""
    store = Store(store_path, create=False)
    try:
        index = AnnIndex(store, BiEncoder(model_dir))
        if not index.load():
            raise SystemExit(
                f"{index.folder}: no embeddings of {model_dir}; run citewise index --embed with it"
            )
        pids, vecs = index.vectors()
        order = np.argsort(pids, kind="stable")
        papers = store.get_many([int(pids[k]) for k in order])
    finally:
        store.close()
    keep = [int(k) for k in order if int(pids[k]) in papers]
    ids = [int(pids[k]) for k in keep]
    return ids, [papers[p] for p in ids], vecs[keep]


def teacher_vectors(store_path: Path, model_dir: Path) -> tuple[list[int], list[str], list[str], np.ndarray]:
    """(row ids, uids, paper texts, teacher vectors): :func:`teacher_records` as the bi-encoder reads them."""
    ids, papers, vecs = teacher_records(store_path, model_dir)
    texts = [paper_text(p.title, p.abstract) for p in papers]
    uids = [p.uid.split(":", 1)[-1] for p in papers]  # the dev files name papers without the prefix
    return ids, uids, texts, vecs


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


@dataclass
class Corpus:
    """Every paper of the training stores: word pieces, the teacher's vector, held out or not."""

    seqs: list[list[int]]
    targets: np.ndarray
    held: np.ndarray

    @classmethod
    def load(cls, stores: list[Path], enc: BiEncoder, model_dir: Path, holdout: int) -> Corpus:
        seqs: list[list[int]] = []
        targets: list[np.ndarray] = []
        held: list[bool] = []
        enc.tok.enable_truncation(enc.doc_len)
        for sp in stores:
            ids, _, texts, vecs = teacher_vectors(sp, model_dir)
            seqs += [e.ids for e in enc.tok.encode_batch(texts)]
            targets.append(vecs)
            held += [i % holdout == 0 for i in ids]
        return cls(seqs, np.concatenate(targets), np.array(held))

    def idf(self, vocab: int) -> np.ndarray:
        df = np.zeros(vocab)
        for s in self.seqs:
            df[np.unique(s)] += 1
        return np.log((1 + len(self.seqs)) / (1 + df)).astype(np.float32)


class Student:
    """The bag of word pieces in torch (sparse rows and weights), as :func:`bag_vectors` serves it."""

    def __init__(self, rows: np.ndarray, weights: np.ndarray) -> None:
        import torch
        from torch import nn

        self.torch, self.nn = torch, nn
        self.table = nn.EmbeddingBag(*rows.shape, mode="sum", sparse=True)
        self.table.weight.data = torch.from_numpy(rows)
        self.weight = nn.Embedding(len(weights), 1, sparse=True)
        self.weight.weight.data = torch.from_numpy(weights[:, None])

    def parameters(self) -> list:
        return [self.table.weight, self.weight.weight]

    def __call__(self, part: list[list[int]]):
        torch = self.torch
        flat = torch.tensor([t for s in part for t in s], dtype=torch.long)
        offsets = torch.tensor(np.cumsum([0] + [len(s) for s in part[:-1]]), dtype=torch.long)
        v = self.table(flat, offsets, per_sample_weights=self.weight(flat).squeeze(-1))
        return self.nn.functional.normalize(v, dim=-1)

    def agreement(self, corpus: Corpus, idx: np.ndarray) -> float:
        """Mean cosine with the teacher over the papers ``idx``."""
        with self.torch.no_grad():
            cos = [
                (self([corpus.seqs[i] for i in part]) * self.torch.from_numpy(corpus.targets[part])).sum(-1)
                for part in np.array_split(idx, max(1, len(idx) // 4096))
            ]
        return float(self.torch.cat(cos).mean())

    def save(self, out: Path) -> None:
        save_int8(out, self.table.weight.data.numpy(), self.weight.weight.data.numpy()[:, 0])


@dataclass
class RankingPairs:
    """Training sentences (attempt 2): the teacher's query vector, the cited paper, its negatives."""

    queries: np.ndarray
    pos: list[list[int]]
    negs: list[list[list[int]]]

    @classmethod
    def load(cls, groups: list[Path], enc: BiEncoder) -> RankingPairs:
        from training.reranker_data import read_groups

        gs = [g for path in groups for g in read_groups(path)]
        q = enc.encode_texts([query_text(g.local, g.citing_title) for g in gs], enc.query_len)
        enc.tok.enable_truncation(enc.doc_len)
        pos = [e.ids for e in enc.tok.encode_batch([g.pos for g in gs])]
        return cls(q, pos, [[e.ids for e in enc.tok.encode_batch(list(g.negs))] for g in gs])

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, list[list[int]]]:
        """``n`` query vectors and their 2n papers (the cited ones first, then one negative each)."""
        gi = rng.integers(0, len(self.pos), n)
        return self.queries[gi], [self.pos[i] for i in gi] + [
            self.negs[i][rng.integers(len(self.negs[i]))] for i in gi
        ]


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

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    enc = BiEncoder(model_dir)
    corpus = Corpus.load(stores, enc, model_dir, holdout)
    t0 = time.time()
    vocab = enc.tok.get_vocab_size()
    student = Student(token_init(enc, vocab), corpus.idf(vocab))
    pairs = RankingPairs.load(groups, enc) if groups and retrieval else None
    opt = torch.optim.SparseAdam(student.parameters(), lr=lr)
    train_idx, test_idx = np.flatnonzero(~corpus.held), np.flatnonzero(corpus.held)

    def progress(epoch: int) -> dict:
        row = {"epoch": epoch, "train_cos": student.agreement(corpus, train_idx[:20000])}
        row.update(heldout_cos=student.agreement(corpus, test_idx), minutes=round((time.time() - t0) / 60, 1))
        print(json.dumps(row), flush=True)
        return row

    log = [progress(0)]
    rng = np.random.default_rng(seed)
    steps, step = epochs * math.ceil(len(train_idx) / batch), 0
    for ep in range(1, epochs + 1):
        for idx in np.array_split(rng.permutation(train_idx), math.ceil(len(train_idx) / batch)):
            for g in opt.param_groups:  # linear decay: the last epochs settle
                g["lr"] = lr * (1 - step / steps)
            loss = _batch_loss(student, corpus, idx, tau, contrast)
            if pairs is not None:
                q, docs = pairs.sample(rng, batch // 2)
                loss = loss + retrieval * _ranking_loss(student, q, docs, tau)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
        log.append(progress(ep))
    settings = {"epochs": epochs, "batch": batch, "lr": lr, "tau": tau, "contrast": contrast}
    settings.update(stores=[str(s) for s in stores], papers=len(corpus.seqs), heldout_every=holdout)
    settings.update(groups=[str(g) for g in groups], retrieval=retrieval, log=log)
    return _write(out, student, model_dir, enc, settings)


def distill_loss(v, t, tau: float, contrast: float):
    """Cosine of the student's vectors ``v`` to the teacher's ``t``, plus (``contrast``) each paper
    nearer its own teacher vector than the other papers' in the batch (also the HAtten students')."""
    import torch
    from torch.nn.functional import cross_entropy

    loss = (1 - (v * t).sum(-1)).mean()
    if contrast:
        loss = loss + contrast * cross_entropy(v @ t.T / tau, torch.arange(len(v)))
    return loss


def _batch_loss(student: Student, corpus: Corpus, idx: np.ndarray, tau: float, contrast: float):
    """The bag's :func:`distill_loss` on the papers ``idx``."""
    import torch

    v, t = student([corpus.seqs[i] for i in idx]), torch.from_numpy(corpus.targets[idx])
    return distill_loss(v, t, tau, contrast)


def _ranking_loss(student: Student, queries: np.ndarray, docs: list[list[int]], tau: float):
    """Each query's cited paper above the other papers of the sample (attempt 2)."""
    import torch
    from torch.nn.functional import cross_entropy

    logits = torch.from_numpy(queries) @ student(docs).T / tau
    return cross_entropy(logits, torch.arange(len(queries)))


def _write(out: Path, student: Student, model_dir: Path, enc: BiEncoder, training: dict) -> dict:
    """The model folder: int8 rows, weights, the teacher's tokenizer, and a manifest naming the
    teacher (relative to the folder) as the query model."""
    from citewise.indexer.index_files import file_sha256

    out.mkdir(parents=True, exist_ok=True)
    student.save(out)
    (out / "tokenizer.json").write_bytes((model_dir / "tokenizer.json").read_bytes())
    files = {n: file_sha256(out / n) for n in ("table.int8.npy", "weights.f32.npy", "tokenizer.json")}
    manifest = {
        "format": "citewise-dense/1",
        "kind": "static",
        "query_model": os.path.relpath(model_dir.resolve(), out.resolve()),
        "dim": enc.dim,
        "doc_len": enc.doc_len,
        "files": files,
        "training": training,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def evaluate(model: Path, store: Path, dump: Path, *, model_dir: Path, k: int = 200) -> dict:
    """Dense alone and fused with the prefetch on a dev dump, the student against its teacher
    (same queries, same query encoder; only the paper vectors differ)."""
    ids, uids, texts, teacher = teacher_vectors(store, model_dir)
    student = StaticEncoder(model)
    t0 = time.time()
    vecs = student.encode_texts(texts)
    embed_s = time.time() - t0
    result = {"papers": len(ids), "student_papers_per_s": round(len(ids) / embed_s, 1)}
    result.update(fusion_report(model, dump, uids, teacher, vecs, student.queries, k))
    return result


def fusion_report(
    out: Path,
    dump: Path,
    uids: list[str],
    teacher: np.ndarray,
    student: np.ndarray,
    queries: BiEncoder,
    k: int,
) -> dict:
    """Agreement, and each set of paper vectors' dense top ``k`` alone and fused with the dump's
    prefetch (``citewise.evaluation.dense_fusion``); the lists are written into ``out``."""
    rows = [json.loads(line) for line in dump.read_text().splitlines() if line.strip()]
    q = queries.encode_texts(
        [query_text(r["query"]["local"], r["query"]["citing_title"]) for r in rows], queries.query_len
    )
    result: dict = {"agreement_cos": round(float((student * teacher).sum(1).mean()), 4)}
    for name, emb in (("teacher", teacher), ("student", student)):
        top = np.argsort(-(q @ emb.T), axis=1)[:, :k]
        path = out / f"dense_{name}_{dump.stem}.jsonl"
        with open(path, "w") as fh:
            for r, t in zip(rows, top, strict=True):
                fh.write(json.dumps({"qid": r["qid"], "dense": [uids[j] for j in t]}) + "\n")
        result[name] = fusion_metrics(str(dump), str(path), weights=(0.5, 1.0, 2.0))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.static_distill", description=__doc__.split("\n")[0])
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
