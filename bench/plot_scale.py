"""Draw ``bench/bench_scale.py``'s results as an SVG (no plotting library needed): how latency,
memory, build time and size grow with the store.

    python bench/plot_scale.py runs/scale/scale.json docs/scale.svg
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# (title, unit, [(label, getter)]) per panel
PANELS = [
    (
        "completion latency",
        "ms",
        [
            ("first answer, median", lambda r: r["serve"]["first_answer_ms"]["median"]),
            ("first answer, p95", lambda r: r["serve"]["first_answer_ms"]["p95"]),
            ("full list, median", lambda r: r["serve"]["reranked_served_ms"]["median"]),
        ],
    ),
    ("server memory", "MB RSS", [("peak while serving", lambda r: r["serve"]["server_peak_rss_mb"])]),
    ("BM25 build", "s", [("from scratch", lambda r: r["bm25_build_s"])]),
    (
        "import (each stage's new papers)",
        "papers/s",
        [("citewise index", lambda r: r["import"]["papers_per_s"])],
    ),
    ("size", "bytes a paper", [("store", lambda r: r["store_bytes_per_paper"])]),
]
COLORS = ["#1f77b4", "#d62728", "#2ca02c"]
W, H, PAD = 300, 210, 46


def panel(x0: int, title: str, unit: str, series: list, rows: list[dict]) -> list[str]:
    """One line chart: papers (thousands) across, the series' values up, from zero."""
    xs = [r["papers"] / 1000 for r in rows]
    top = max(get(r) for _, get in series for r in rows) * 1.15 or 1
    left, right, bottom, up = x0 + PAD, x0 + W - 10, H - 30, 30

    def px(x: float) -> float:
        return left + (right - left) * x / max(xs)

    def py(y: float) -> float:
        return bottom - (bottom - up) * y / top

    out = [
        f'<text x="{x0 + W / 2}" y="16" text-anchor="middle" font-weight="bold">{title}</text>',
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#444"/>',
        f'<line x1="{left}" y1="{bottom}" x2="{left}" y2="{up}" stroke="#444"/>',
        f'<text x="{left - 4}" y="{up + 4}" text-anchor="end" font-size="10">{top:.0f}</text>',
        f'<text x="{left - 4}" y="{bottom}" text-anchor="end" font-size="10">0</text>',
        f'<text x="{x0 + 12}" y="{(up + bottom) / 2}" font-size="10" '
        f'transform="rotate(-90 {x0 + 12} {(up + bottom) / 2})" text-anchor="middle">{unit}</text>',
    ]
    for x in xs:
        out.append(f'<text x="{px(x)}" y="{bottom + 14}" text-anchor="middle" font-size="10">{x:.0f}k</text>')
    for i, (label, get) in enumerate(series):
        pts = " ".join(f"{px(x):.1f},{py(get(r)):.1f}" for x, r in zip(xs, rows, strict=True))
        color = COLORS[i % len(COLORS)]
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        out.append(
            f'<text x="{left + 6}" y="{up + 12 + 12 * i}" font-size="10" fill="{color}">{label}</text>'
        )
    return out


def main() -> None:
    results = json.loads(Path(sys.argv[1]).read_text())
    rows = sorted((r for r in results.values() if "serve" in r), key=lambda r: r["papers"])
    body: list[str] = []
    for i, (title, unit, series) in enumerate(PANELS):
        body += panel(i * W, title, unit, series, rows)
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * len(PANELS) + 20}" height="{H}" '
        'font-family="sans-serif" font-size="12">\n<rect width="100%" height="100%" fill="white"/>\n'
        + "\n".join(body)
        + f'\n<text x="6" y="{H - 4}" font-size="9">papers in the store; 2 shared cores '
        "(bench/bench_scale.py)</text>\n</svg>\n"
    )
    Path(sys.argv[2]).write_text(svg)


if __name__ == "__main__":
    main()
