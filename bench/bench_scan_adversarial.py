"""Worst scan times on the adversarial 100 KB drafts of tests/server/test_scan_adversarial.py (JSON).

Each input is scanned by every draft and ``.bib`` scanner the server runs; the median of
``--runs`` runs is kept per (input, scanner), and the slowest ten are printed with the load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from citewise.server import draft  # noqa: E402
from tests.server.test_scan_adversarial import adversarial_texts, scanners  # noqa: E402


def _clear_caches() -> None:
    """The facade caches the last documents; a timing must not hit them."""
    draft.clear_cache()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    load_before = os.getloadavg()
    rows = []
    for name, text in adversarial_texts():
        for scan, fn in scanners(text):
            times = []
            for _ in range(args.runs):
                _clear_caches()
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
            rows.append({"input": name, "scan": scan, "median_s": round(statistics.median(times), 4)})
    rows.sort(key=lambda r: r["median_s"], reverse=True)
    print(
        json.dumps(
            {
                "inputs": len({r["input"] for r in rows}),
                "scans": len(rows),
                "input_chars": 100_000,
                "runs": args.runs,
                "worst": rows[:10],
                "load_before": load_before,
                "load_after": os.getloadavg(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
