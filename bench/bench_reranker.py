"""Reranker inference throughput: pairs/s of the served ONNX models on real pairs, with the load.

    python bench/bench_reranker.py MODEL_DIR --data data/reranker/train.jsonl [--files model.int8.onnx model.onnx]

Pairs are real (query, candidate) texts of the training groups file (queries with their citing
title/abstract, candidates with abstracts), encoded exactly as served (``PairEncoder``), scored in
batches of ``--batch`` with ``--threads`` onnxruntime threads. Files are timed in turns, so a change in
the machine's load hits them alike; the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # training/ (a checkout folder, not installed)

from _common import machine  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from citewise.models.reranker import CrossEncoderReranker, RerankSettings
    from training.reranker_data import read_groups

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--data", required=True, help="training groups file (JSON Lines) for real pairs")
    ap.add_argument("--files", nargs="+", default=["model.int8.onnx"])
    ap.add_argument("--groups", type=int, default=40, help="queries; each scores its positive + negatives")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args(argv)
    groups = read_groups(a.data)[-a.groups :]
    rerankers = {
        f: CrossEncoderReranker(
            a.model_dir, RerankSettings(batch_size=a.batch, threads=a.threads), model_file=f
        )
        for f in a.files
    }
    work = [
        (g.query(), [g.pos, *g.negs] * 4) for g in groups
    ]  # ~16-32 candidates a query, like a rerank call
    n_pairs = sum(len(t) for _, t in work)
    times: dict[str, list[float]] = {f: [] for f in a.files}
    for r in rerankers.values():  # warm up (and fill the candidate cache, as a server would)
        r.score_texts(*work[0])
    for _ in range(a.rounds):
        for f, r in rerankers.items():
            t = time.perf_counter()
            for q, texts in work:
                r.score_texts(q, texts)
            times[f].append(time.perf_counter() - t)
    out = {
        "machine": machine(),
        "pairs": n_pairs,
        "batch": a.batch,
        "threads": a.threads,
        "max_len": next(iter(rerankers.values())).encoder.settings.max_len,
        "pairs_per_s": {f: round(n_pairs / min(ts), 1) for f, ts in times.items()},
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
