"""Helpers shared by the bench scripts: where the data is, load, and robust summaries."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CITEWISE_SHARED_DATA", REPO.parent / "shared" / "data"))


def machine() -> dict:
    """What the figures were measured on: cores and the load average at the time."""
    return {"cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()]}


def summary(seconds: list[float]) -> dict:
    """Median, p95 and spread of a list of timings, in milliseconds."""
    ms = sorted(1000 * s for s in seconds)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return {
        "runs": len(ms),
        "median_ms": round(statistics.median(ms), 2),
        "p95_ms": round(p95, 2),
        "min_ms": round(ms[0], 2),
        "max_ms": round(ms[-1], 2),
    }
