"""How long ``citewise index`` takes to embed a user-sized store (issue 26, item 4); prints JSON.

A store of up to ``dense_index.SMALL_STORE_PAPERS`` papers is embedded by the bi-encoder itself,
a bigger one by the fast attention bag. This times both models on the same real ACM-CR entries
(the ``.bib`` of ``bench_bib_index.real_bib``): each run a fresh store, ``citewise index BIB``
in a subprocess as a user runs it (model loading included), median over ``--runs``. The default
sizes are a typical ``.bib`` and the largest store the bi-encoder embeds by default.

Usage: python bench/bench_small_store_embed.py [--sizes 300,5000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402
from bench_bib_index import real_bib  # noqa: E402

MODELS = {"size rule (default)": None, "attention bag (forced)": "static_attention"}


def index_once(bib: Path, model: str | None) -> dict:
    """One ``citewise index`` of ``bib`` into a new store: wall seconds and its JSON summary."""
    env = dict(os.environ)
    env.pop("CITEWISE_DENSE_MODEL", None)
    if model:
        env["CITEWISE_DENSE_MODEL"] = model
    with tempfile.TemporaryDirectory(prefix="citewise-bench-embed-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "citewise.cli",
            "index",
            str(bib),
            "--store",
            f"{tmp}/s.sqlite",
            "--json",
            "-q",
        ]
        t = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        wall = time.perf_counter() - t
        info = json.loads(done.stdout)
        folder = (
            json.loads(
                subprocess.run(
                    [sys.executable, "-m", "citewise.cli", "info", "--store", f"{tmp}/s.sqlite", "--json"],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=True,
                ).stdout
            )
            .get("models", {})
            .get("dense", {})
        )
    return {"wall_s": wall, "embed_s": info.get("embed_seconds", 0.0), "kind": folder.get("kind", "")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="300,5000")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    out: dict = {"machine_before": machine(), "sizes": []}
    with tempfile.TemporaryDirectory(prefix="citewise-bench-bib-") as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            bib = Path(tmp) / f"library-{n}.bib"
            bib.write_text(real_bib(n), encoding="utf-8")
            row: dict = {"papers": n}
            for label, model in MODELS.items():
                runs = [index_once(bib, model) for _ in range(args.runs)]
                embed = statistics.median(r["embed_s"] for r in runs)
                row[label] = {
                    "kind": runs[0]["kind"],
                    "index_s_median": round(statistics.median(r["wall_s"] for r in runs), 2),
                    "embed_s_median": round(embed, 2),
                    "papers_per_s": round(n / embed, 1) if embed else None,
                    "runs": args.runs,
                }
            out["sizes"].append(row)
    out["machine_after"] = machine()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
