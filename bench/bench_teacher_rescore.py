"""What the teacher stage costs per query (models/teacher_rescore.py); prints JSON.

On a store embedded by the attention bag (a plain ``citewise index`` of more than 5,000 papers), the
second stage re-scores the fused head with the bi-encoder's own paper vectors, embedding each paper
the first time it reaches a head. This times that stage alone on real ACM-CR dev sentences: a cold
pass (a fresh cache, as a fresh server meets a draft), then the same sentences again (warm: the
field's papers already embedded), then as a restarted server meets them (the vectors the cold pass
kept beside the store, read from disk), per query the stage's milliseconds and how many papers it
embedded. Each run a fresh cache; medians over ``--runs``. The prefetch is timed apart (it is the
same with or without the stage).

Usage: python bench/bench_teacher_rescore.py --store STORE [--queries 60] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import SHARED_DATA, machine, summary  # noqa: E402

from citewise.evaluation import protocol as ev  # noqa: E402

DATA = SHARED_DATA / "acm-cr"


def one_run(rec, queries, prefetched, folder: Path) -> dict:
    """A fresh cache: every query's stage time and papers embedded, cold, then warm, then in a
    restarted process's place (new vectors in memory, reading what the cold pass kept on disk in
    ``folder``; its first query pays for reading the files)."""
    from citewise.indexer.vector_cache import VectorCache
    from citewise.models.teacher_rescore import TeacherRescore, TeacherVectors

    live = rec.second_stage

    def fresh_stage() -> TeacherRescore:
        cache = VectorCache(folder, "papers", int(live.teacher.dim), live.teacher.model_hash)
        return TeacherRescore(live.teacher, live.settings, TeacherVectors(live.teacher, cache=cache))

    stage = fresh_stage()
    out = {}
    for name in ("cold", "warm", "restarted"):
        if name == "restarted":
            stage = fresh_stage()
        took, embedded = [], []
        for q, (cands, papers) in zip(queries, prefetched, strict=True):
            before = stage.vectors.embedded
            t = time.perf_counter()
            stage.rerank(q.query, cands, papers)
            took.append(time.perf_counter() - t)
            embedded.append(stage.vectors.embedded - before)
        out[name] = {**summary(took), "papers_embedded_median": statistics.median(embedded)}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", required=True, help="a store a plain `citewise index` embedded with the bag")
    p.add_argument("--queries", type=int, default=60, help="dev sentences (default 60)")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    from citewise.indexer.store import Store
    from citewise.models.recommender import Recommender
    from citewise.models.teacher_rescore import TeacherRescore

    store = Store(args.store, create=False)
    rec = Recommender(store)
    if not isinstance(rec.second_stage, TeacherRescore):
        print(
            f"{args.store}: its second stage is not the teacher's (a bi-encoder store, or one that knows citations)"
        )
        return 2
    coll = ev.acmcr_collection(store, ev.load_blacklist(DATA / "blacklist.txt"))
    queries = ev.load_dev_queries(DATA / "dev", coll.dois)[: args.queries]
    prefetch_s, prefetched = [], []
    pf = rec.prefetcher(coll.excluded)
    for q in queries:
        t = time.perf_counter()
        cands = pf.candidates(q.query, 200, rec.mode())
        prefetch_s.append(time.perf_counter() - t)
        prefetched.append((cands, store.get_many([c.paper_id for c in cands[:100]])))
    start = machine()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [one_run(rec, queries, prefetched, Path(tmp) / f"run{i}") for i in range(args.runs)]
    report = {
        "store": args.store,
        "papers": store.count(),
        "queries": len(queries),
        "head": rec.second_stage.settings.max_candidates,
        "prefetch": summary(prefetch_s),
        **{
            phase: {
                "median_ms": statistics.median(r[phase]["median_ms"] for r in runs),
                "p95_ms": statistics.median(r[phase]["p95_ms"] for r in runs),
                "papers_embedded_median": statistics.median(r[phase]["papers_embedded_median"] for r in runs),
                "runs_median_ms": [r[phase]["median_ms"] for r in runs],
            }
            for phase in ("cold", "warm", "restarted")
        },
        "machine_before": start,
        "machine_after": machine(),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
