"""A burst of ``didChange`` + completion requests with cancellations, through the real server (JSON).

The same client as ``tests/lsp/test_lsp_burst.py`` (small store from ``examples/library.bib``,
every third request cancelled with ``$/cancelRequest``, plus requests for an unopened
document, an out-of-range and a mid-surrogate position), with 1,000 rounds by default:
answered / cancelled / ContentModified / error counts, answer latency, server memory and
backlog before and after. Median over ``--runs`` runs of the latencies is reported per run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

from tests.lsp.test_lsp_burst import build_store, run_burst  # noqa: E402


async def one(rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        result = await run_burst(root, build_store(Path(tmp)), rounds)
        out = result.figures()
        out["error_samples"] = result.errors[:3]
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    before = machine()
    runs = [asyncio.run(one(args.rounds)) for _ in range(args.runs)]
    print(json.dumps({"machine_before": before, "runs": runs, "machine_after": machine()}, indent=2))


if __name__ == "__main__":
    main()
