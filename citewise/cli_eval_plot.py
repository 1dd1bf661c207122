"""``citewise eval ... --plot FILE``: R@10 and MRR against the number of reranked candidates.

Paper 004 (Table 4) reports how the cross-encoder's gain depends on how many prefetched candidates
it reorders. Scoring is the expensive part on CPU, so each query is prefetched once and its top
``max(N)`` scored once by the same reranker ``citewise eval --reranker`` runs; every smaller N is
that head's prefix reordered with the served :func:`~citewise.models.reranker.fused_order`, so the
curve costs one rerank at the largest N, not one per point. The one difference from separate
``--candidates N`` runs: the int8 model quantises activations per batch, so a score can move a
little with the batch it was computed in (docs/reranker.md, "Export").

matplotlib (the ``train`` extra) is imported only when drawing: starting citewise must stay light.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

METRICS = ("R@10", "MRR")  # drawn; every metric goes to the JSON


def _user_error(message: str) -> Exception:
    from .cli_common import UserError

    return UserError(message)


def _scorer(stage):
    """The reranker's ``score_texts`` (a cross-encoder), or one clear error when there is none."""
    if stage is None:
        raise _user_error(
            "--plot needs a reranker: pass --reranker DIR (an exported folder, docs/reranker.md); "
            "none ships by default, and --no-rerank turns it off"
        )
    if not hasattr(stage, "score_texts"):
        raise _user_error(f"--plot needs a cross-encoder reranker; {type(stage).__name__} has no scores")
    return stage


def _head_texts(rec, query, cands: list) -> list[str]:
    """What the reranker reads of each candidate, in prefetch order (as ``Recommender.rerank``
    builds it: with how the store's papers cite it)."""
    from citewise.models.reranker import candidate_texts

    pids = [c.paper_id for c in cands]
    return candidate_texts(pids, rec.store.get_many(pids), rec.citing_snippets(query, pids))


def curve(
    queries: list,
    prefetch: Callable,
    stage,
    rec,
    id_of: dict[int, str],
    ns: tuple[int, ...],
    tick: Callable[[], None] | None = None,
) -> tuple[dict[int, dict[str, float]], list[float]]:
    """Metrics at each number of reranked candidates in ``ns``, and the seconds each query took
    (prefetch + scoring the largest head)."""
    from citewise.evaluation import protocol as ev
    from citewise.models.reranker import reordered

    top, weight = max(ns), stage.settings.prefetch_weight
    per_n: dict[int, list[dict[str, float]]] = {n: [] for n in ns}
    seconds: list[float] = []
    for q in queries:
        t = time.perf_counter()
        cands = prefetch(q, max(top, 1000))
        texts = _head_texts(rec, q.query, cands[:top])
        scores = stage.score_texts(q.query, texts, t + stage.settings.budget_s) if texts else []
        seconds.append(time.perf_counter() - t)
        ids = [id_of[c.paper_id] for c in cands]
        for n in ns:
            per_n[n].append(ev.query_metrics(reordered(ids, scores, n, weight), q.relevant))
        if tick is not None:
            tick()
    return {n: ev.aggregate(m) for n, m in per_n.items()}, seconds


def plot_title(run: dict) -> str:
    """The figure's title from the points' JSON (so a figure can be redrawn from it alone)."""
    n_queries = next(iter(run["points"].values()))[0]["queries"]
    return (
        f"{run['dataset']} dev, {n_queries} queries:\n"
        f"the top N of the {run['prefetch']} prefetch reranked"
        f" (fusion weight {run['prefetch_weight']:g})"
    )


def draw(points: dict[str, list[dict]], path: str | Path, title: str) -> Path:
    """A PNG of R@10 (solid) and MRR (dashed) against the number of reranked candidates, one
    colour per protocol. The Agg backend: no display is needed (CI, servers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for i, (protocol, rows) in enumerate(points.items()):
        xs = [r["candidates"] for r in rows]
        for metric, style in zip(METRICS, ("-", "--"), strict=True):
            ax.plot(
                xs,
                [r[metric] for r in rows],
                style,
                marker="o",
                color=f"C{i}",
                label=f"{metric} ({protocol})",
            )
    ax.set_xlabel("candidates reranked (0 = prefetch only)")
    ax.set_ylabel("score")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def run_plot(args: argparse.Namespace, rec, stage, prefetch: Callable, loaded: dict, id_of: dict) -> int:
    """Compute the curve for each protocol, print it as a table, write the points' JSON beside
    the PNG (and to ``--json``), and draw the PNG."""
    from citewise.evaluation import protocol as ev

    from .cli_common import progress_bar

    stage = _scorer(stage)
    if importlib.util.find_spec("matplotlib") is None:  # say so before minutes of scoring, not after
        raise _user_error("--plot needs matplotlib: pip install -e '.[train]'")
    ns = tuple(args.plot_candidates)
    points: dict[str, list[dict]] = {}
    seconds: list[float] = []
    load_before = [round(x, 2) for x in os.getloadavg()]
    for protocol, (queries, _own) in loaded.items():
        queries = queries[: args.limit] if args.limit else queries
        bar = progress_bar(len(queries), f"eval curve ({protocol})", " queries", args.quiet)
        by_n, took = curve(queries, prefetch, stage, rec, id_of, ns, bar.update)
        bar.close()
        seconds += took
        points[protocol] = [{"candidates": n, **m} for n, m in by_n.items()]
        rows = {
            f"{rec.mode()} + rerank@{n}" if n else f"{rec.mode()} (prefetch only)": m for n, m in by_n.items()
        }
        print(f"{protocol} protocol:\n{ev.format_table(rows)}")
    seconds.sort()
    out = {
        "dataset": args.dataset,
        "store": str(rec.store.path),
        "reranker": str(getattr(stage, "dir", "")),
        "prefetch": rec.mode(),
        "prefetch_weight": stage.settings.prefetch_weight,
        "budget_s": stage.settings.budget_s,
        "median_ms_per_query": round(1000 * seconds[len(seconds) // 2], 1) if seconds else 0.0,
        "load_average": {"start": load_before, "end": [round(x, 2) for x in os.getloadavg()]},
        "points": points,
    }
    print(f"median {out['median_ms_per_query']} ms per query (prefetch + top {max(ns)} scored)")
    text = json.dumps(out, indent=2) + "\n"
    for target in {Path(args.plot).with_suffix(".json"), *([Path(args.json)] if args.json else [])}:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    png = draw(points, args.plot, plot_title(out))
    print(f"wrote {png} and {Path(args.plot).with_suffix('.json')}", file=sys.stderr)
    return 0


# -- eval check (issue 27): detection of swapped citations against false alarms -------------------

_SWAP_LABELS = {"random": "random paper", "venue": "same-venue paper", "bm25": "top BM25 paper not cited"}


def draw_check_curve(report: dict, path: str | Path) -> Path:
    """The ``unlikely-citation`` curve of ``citewise eval check``: detection of each swap kind
    against the false alarms on true citations, whole and up to 10%, with the shipped threshold
    marked. SVG or PNG by the file's suffix."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    u = report["unlikely_citation"]
    fa = [p["false_alarms"] for p in u["curve"]]
    at = u["at_shipped_threshold"]
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 4.0), dpi=100)
    for ax, right in zip(axes, (1.0, 0.1), strict=True):
        for i, kind in enumerate(_SWAP_LABELS):
            ax.plot(fa, [p["detection"][kind] for p in u["curve"]], color=f"C{i}", label=_SWAP_LABELS[kind])
            ax.plot([at["false_alarms"]], [at["detection"][kind]], "o", color=f"C{i}")
        ax.axvline(at["false_alarms"], color="grey", ls=":", lw=1)
        ax.set_xlim(0, right)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("false alarms (fraction of true citations flagged)")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("detection (fraction of swapped citations flagged)")
    axes[0].legend(fontsize=8, loc="lower right")
    axes[1].set_title(f"up to 10% (dots: shipped threshold {u['shipped_threshold']})", fontsize=9)
    axes[0].set_title(
        f"{report['dataset']} dev: {u['trials']['true']} true citations, fit ratio (BM25)", fontsize=9
    )
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="svg" if path.suffix.lower() == ".svg" else "png")
    plt.close(fig)
    return path
