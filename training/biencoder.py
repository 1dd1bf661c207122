"""A dense prefetch candidate for issue 16: all-MiniLM-L6-v2 as a bi-encoder, as shipped (it was
trained on a billion sentence pairs, S2ORC citation pairs among them) and fine-tuned on the
reranker's training groups (in-batch negatives + one hard negative, as sentence-transformers'
MultipleNegativesRankingLoss). Measured fused with BM25 before anything is served:
``retrieve`` writes each dev query's dense top-K, fused offline with the prefetch lists.

Training and retrieval run where torch is (a lent GPU machine in this session); nothing here is
imported by the server.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch
from torch import nn

from citewise.evaluation.citances import read_jsonl
from citewise.models.biencoder_onnx import query_text
from training.reranker_data import read_groups

QUERY_LEN = 64
DOC_LEN = 128


class Encoder(nn.Module):
    """Mean-pooled, L2-normalised BERT embeddings (how all-MiniLM-L6-v2 is used)."""

    def __init__(self, base: str | Path) -> None:
        super().__init__()
        from tokenizers import Tokenizer
        from transformers import AutoModel

        self.bert = AutoModel.from_pretrained(str(base), local_files_only=True)
        self.tok = Tokenizer.from_file(str(Path(base) / "tokenizer.json"))

    def tokens(self, texts: list[str], max_len: int, device: torch.device) -> dict[str, torch.Tensor]:
        self.tok.enable_truncation(max_len)
        self.tok.enable_padding(pad_id=self.tok.token_to_id("[PAD]") or 0)
        enc = self.tok.encode_batch(texts)
        ids = torch.tensor([e.ids for e in enc], device=device)
        mask = torch.tensor([e.attention_mask for e in enc], device=device)
        return {"input_ids": ids, "attention_mask": mask}

    def forward(self, texts: list[str], max_len: int) -> torch.Tensor:
        device = next(self.parameters()).device
        t = self.tokens(texts, max_len, device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            h = self.bert(**t, token_type_ids=torch.zeros_like(t["input_ids"])).last_hidden_state
        m = t["attention_mask"].unsqueeze(-1).float()
        v = (h.float() * m).sum(1) / m.sum(1).clamp(min=1)
        return nn.functional.normalize(v, dim=-1)


def train(
    base: str, data: str, out: str, *, epochs: int = 2, batch: int = 128, lr: float = 2e-5, seed: int = 5
) -> Path:
    """Fine-tune on (query, positive, one hard negative) with in-batch negatives; save a BERT folder."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Encoder(base).to(device)
    groups = read_groups(data)
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    steps = epochs * (len(groups) // batch)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50) * max(0.0, 1 - s / steps))
    model.train()
    log = []
    t0 = time.time()
    step = 0
    for _ in range(epochs):
        rng.shuffle(groups)
        for i in range(0, len(groups) - batch + 1, batch):
            chunk = groups[i : i + batch]
            q = model([query_text(g.local, g.citing_title) for g in chunk], QUERY_LEN)
            d = model([g.pos for g in chunk] + [rng.choice(g.negs) for g in chunk], DOC_LEN)
            logits = 20.0 * q @ d.T
            loss = nn.functional.cross_entropy(logits, torch.arange(len(chunk), device=device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if step % 50 == 0:
                log.append({"step": step, "loss": round(loss.item(), 4), "s": round(time.time() - t0, 1)})
                print(json.dumps(log[-1]), flush=True)
    outp = Path(out)
    outp.mkdir(parents=True, exist_ok=True)
    model.bert.save_pretrained(str(outp))
    model.tok.no_padding()
    model.tok.no_truncation()
    model.tok.save(str(outp / "tokenizer.json"))
    (outp / "train_log.json").write_text(json.dumps(log))
    return outp


@torch.no_grad()
def retrieve(model_dir: str, papers: str, dumps: list[str], out: str, k: int = 200, batch: int = 512) -> None:
    """Dense top-``k`` of each dev query in ``dumps`` over ``papers`` (JSON Lines: id, text)."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Encoder(model_dir).to(device).eval()
    rows = list(read_jsonl(papers))
    ids = [r["id"] for r in rows]
    t0 = time.time()
    emb = torch.cat(
        [model([r["text"] for r in rows[i : i + batch]], DOC_LEN) for i in range(0, len(rows), batch)]
    )
    took = time.time() - t0
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"papers": len(ids), "embed_s": round(took, 1)}) + "\n")
        for dump in dumps:
            qs = list(read_jsonl(dump))
            qv = torch.cat(
                [
                    model(
                        [
                            query_text(r["query"]["local"], r["query"]["citing_title"])
                            for r in qs[i : i + batch]
                        ],
                        QUERY_LEN,
                    )
                    for i in range(0, len(qs), batch)
                ]
            )
            top = (qv @ emb.T).topk(k, dim=1).indices.cpu().tolist()
            for r, t in zip(qs, top, strict=True):
                fh.write(
                    json.dumps({"dump": Path(dump).name, "qid": r["qid"], "dense": [ids[j] for j in t]})
                    + "\n"
                )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--base", required=True)
    t.add_argument("--data", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--epochs", type=int, default=2)
    r = sub.add_parser("retrieve")
    r.add_argument("model")
    r.add_argument("--papers", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("dumps", nargs="+")
    a = ap.parse_args(argv)
    if a.cmd == "train":
        print(train(a.base, a.data, a.out, epochs=a.epochs))
    else:
        retrieve(a.model, a.papers, a.dumps, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
