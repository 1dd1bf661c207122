"""Score a dev set once with the reranker, then measure every way of using the scores offline.

Cross-encoder scoring is the expensive part on CPU (minutes per dev set), while the choices that
matter — how many prefetched candidates to rerank (paper 004, Table 4) and whether to fuse the
reranker's rank with the prefetch rank — need no new scores. ``score`` writes, per query, the
prefetch ranking (depth 1000) and the cross-encoder scores of its head; ``report`` prints the
metrics table for each (candidates, prefetch weight) with the same :func:`fused_order` the
served reranker uses, so a configuration chosen here is exactly what ``citewise eval --rerank``
and the editor run. Choose on ACM-CR dev; report the ACL dev with the ACM-chosen setting.

    python -m training.reranker_eval score acm-cr --reranker DIR --store S --out run.jsonl
    python -m training.reranker_eval report run.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from citewise.evaluation import protocol as ev
from citewise.models.reranker import CrossEncoderReranker, RerankSettings, candidate_text, reordered
from training.paths import SHARED_DATA

DATA = SHARED_DATA


def _load(dataset: str, store, data: Path):
    """(queries, id_of, excluded-for-all, citing id -> own paper id) of a dev set."""
    if dataset == "acm-cr":
        coll = ev.acmcr_collection(store, ev.load_blacklist(data / "acm-cr" / "blacklist.txt"))
        return ev.load_dev_queries(data / "acm-cr" / "dev", coll.dois), coll.doi_of, coll.excluded, {}
    queries, own = ev.load_acl_dev_queries(data / "citations" / "scisummnet-citances.jsonl", store)
    return queries, ev.acl_ids(store), set(), own


def _select(queries: list, data: Path, *, limit: int | None, sample: int | None, unseen_cited: bool) -> list:
    """The queries to score: optionally only unseen cited papers, the first ``limit``, a fixed sample."""
    if unseen_cited:
        # Only sentences citing papers that are never a training positive: the ACL dev split shares
        # its cited papers with training, so a title prior alone scores well on the rest.
        from citewise.evaluation.citances import load_citances

        seen = {x for c in load_citances(data / "citations" / "scisummnet-citances.jsonl") for x in c.cited}
        queries = [q for q in queries if not q.relevant & seen]
    queries = queries[:limit] if limit else queries
    if sample and sample < len(queries):  # a fixed random subset (dev files are sorted by cited paper)
        import random

        queries = random.Random(0).sample(queries, sample)
    return queries


def score(
    dataset: str,
    store,
    reranker: CrossEncoderReranker | None,
    out: str | Path,
    *,
    candidates: int = 50,
    data: Path = DATA,
    limit: int | None = None,
    sample: int | None = None,
    unseen_cited: bool = False,
    every: int = 25,
    depth: int = 1000,
    with_texts: bool = False,
) -> Path:
    """Write one JSON line per query: relevant ids, prefetch ids (``depth``), head scores; with
    ``with_texts`` also the query and the head's candidate texts, so a torch checkpoint can score
    the same lists elsewhere (``score-dump``, on a GPU machine)."""
    from citewise.models.recommender import Recommender

    queries, id_of, excluded, own = _load(dataset, store, data)
    queries = _select(queries, data, limit=limit, sample=sample, unseen_cited=unseen_cited)
    rec = Recommender(store, use_reranker=False)
    shared = rec.prefetcher(excluded)
    out = Path(out)
    t0, pairs = time.perf_counter(), 0
    with open(out, "w", encoding="utf-8") as fh:
        for n, q in enumerate(queries, start=1):
            pf = rec.prefetcher(excluded | {own[q.citing_doi]}) if q.citing_doi in own else shared
            cands = pf.candidates(q.query, depth, rec.mode())
            head = cands[:candidates]
            papers = store.get_many([c.paper_id for c in head])
            texts = [
                candidate_text(
                    papers[c.paper_id].title, papers[c.paper_id].abstract, papers[c.paper_id].keywords
                )
                for c in head
            ]
            scores = reranker.score_texts(q.query, texts) if reranker is not None else []
            pairs += len(texts)
            row = {
                "qid": q.qid,
                "relevant": sorted(q.relevant),
                "ids": [id_of[c.paper_id] for c in cands],
                "scores": scores,
            }
            if with_texts:
                row["query"] = asdict(q.query)
                row["texts"] = texts
            fh.write(json.dumps(row) + "\n")
            if every and n % every == 0:
                el = time.perf_counter() - t0
                print(f"{n}/{len(queries)} queries, {pairs / el:.1f} pairs/s", file=sys.stderr, flush=True)
    return out


def score_dump(checkpoint: str | Path, dump: str | Path, out: str | Path, batch: int = 256) -> Path:
    """Score a ``score --with-texts`` file with a torch checkpoint (GPU when there is one)."""
    import torch

    from citewise.evaluation.citances import read_jsonl
    from citewise.models.query import ContextQuery
    from citewise.models.reranker import PairEncoder
    from training.reranker_train import encoder_settings, load_checkpoint_model, pick_device, run_model
    from training.train_configs import RerankerTrainConfig

    ckpt = Path(checkpoint)
    cfg = RerankerTrainConfig(**json.loads((ckpt / "train_config.json").read_text()))
    enc = PairEncoder.from_file(ckpt / "tokenizer.json", encoder_settings(cfg))
    device = pick_device("auto")
    model = load_checkpoint_model(ckpt).to(device)
    with open(out, "w", encoding="utf-8") as fh, torch.no_grad():
        for row in read_jsonl(dump):
            q = ContextQuery(**{**row["query"], "others": tuple(row["query"]["others"])})
            qids = enc.query_ids(q)
            scores: list[float] = []
            for i in range(0, len(row["texts"]), batch):
                pairs = [enc.pair(qids, enc.candidate_ids(t)) for t in row["texts"][i : i + batch]]
                arrays = {k: torch.from_numpy(v) for k, v in enc.batch(pairs).items()}
                scores += [float(x) for x in run_model(model, arrays, device).float().cpu()]
            fh.write(
                json.dumps(
                    {"qid": row["qid"], "relevant": row["relevant"], "ids": row["ids"], "scores": scores}
                )
                + "\n"
            )
    return Path(out)


def metrics(run: list[dict], candidates: int, prefetch_weight: float) -> dict[str, float]:
    """Metrics when the first ``candidates`` are reordered (``candidates`` 0: the prefetch alone)."""
    per_query = []
    for row in run:
        ranked = reordered(row["ids"], row["scores"], candidates, prefetch_weight)
        per_query.append(ev.query_metrics(ranked, set(row["relevant"])))
    return ev.aggregate(per_query)


def report(
    path: str | Path,
    candidates: tuple[int, ...] = (5, 10, 15, 20, 30, 50, 100),
    weights: tuple[float, ...] = (0, 0.5, 1, 2),
) -> str:
    run = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    have = min(len(r["scores"]) for r in run)
    rows = {"prefetch": metrics(run, 0, 0)}
    for n in (c for c in candidates if c <= have):
        for w in weights:
            rows[f"rerank@{n} w={w:g}"] = metrics(run, n, w)
    return ev.format_table(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score")
    s.add_argument("dataset", choices=("acm-cr", "acl-citances"))
    s.add_argument("--store", required=True)
    s.add_argument("--reranker", help="exported folder; without it only the prefetch is written")
    s.add_argument("--model-file", default="model.int8.onnx")
    s.add_argument("--candidates", type=int, default=50)
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--limit", type=int)
    s.add_argument("--sample", type=int, help="a fixed random subset of this many queries (quick checks)")
    s.add_argument(
        "--unseen-cited",
        action="store_true",
        help="acl-citances: only sentences whose cited papers are never training positives",
    )
    s.add_argument("--data", default=str(DATA))
    s.add_argument("--out", required=True)
    s.add_argument("--depth", type=int, default=1000, help="prefetch ids written per query")
    s.add_argument(
        "--with-texts", action="store_true", help="also write the query and head texts (for score-dump)"
    )
    d = sub.add_parser("score-dump", help="score a --with-texts file with a torch checkpoint")
    d.add_argument("checkpoint")
    d.add_argument("dump")
    d.add_argument("--out", required=True)
    r = sub.add_parser("report")
    r.add_argument("run")
    a = ap.parse_args(argv)
    if a.cmd == "report":
        print(report(a.run))
        return 0
    if a.cmd == "score-dump":
        print(report(score_dump(a.checkpoint, a.dump, a.out)))
        return 0
    from citewise.indexer.store import Store

    rr = (
        CrossEncoderReranker(a.reranker, RerankSettings(threads=a.threads), model_file=a.model_file)
        if a.reranker
        else None
    )
    score(
        a.dataset,
        Store(a.store, create=False),
        rr,
        a.out,
        candidates=a.candidates,
        data=Path(a.data),
        limit=a.limit,
        sample=a.sample,
        unseen_cited=a.unseen_cited,
        depth=a.depth,
        with_texts=a.with_texts,
    )
    print(report(a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
