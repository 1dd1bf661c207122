"""Recall against the number of candidates for ``citewise eval --json`` results (issue 26: the README's
"R@10 against candidates" plot of the default pipeline beside the pipelines it replaced).

Each argument is ``LABEL=FILE.json``; the plot has one line per file over the depths the file holds
(R@10, R@50, R@100, R@200, R@1000). matplotlib comes with the ``train`` extra.

    python bench/plot_recall.py docs/default-recall.svg "default (static fused)=runs/acm-static.json" ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DEPTHS = (10, 50, 100, 200, 1000)


def series(path: Path) -> tuple[list[int], list[float]]:
    """(depths, recall) of one ``citewise eval --json`` file."""
    data = json.loads(path.read_text())
    depths = [k for k in DEPTHS if f"R@{k}" in data]
    return depths, [float(data[f"R@{k}"]) for k in depths]


def main(argv: list[str]) -> int:
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        print(__doc__, file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = argv[1:]
    # The legend goes below the axes (a dozen long labels hid the curves inside them), and the
    # colours come from a 20-colour map so no two curves share one.
    fig, ax = plt.subplots(figsize=(7.5, 4.2 + 0.22 * len(runs)))
    colours = plt.get_cmap("tab20").colors
    for n, arg in enumerate(runs):
        label, file = arg.rsplit("=", 1)  # labels may hold "=" (CITEWISE_DENSE_MODEL=...)
        depths, recall = series(Path(file))
        ax.plot(depths, recall, marker="o", color=colours[(2 * n) % 20 + (2 * n) // 20], label=label)
    ax.set_xscale("log")
    ax.set_xticks(list(DEPTHS), [str(k) for k in DEPTHS])
    ax.set_xlabel("candidates (K)")
    ax.set_ylabel("R@K")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    fig.tight_layout()
    fig.savefig(argv[0], metadata={"Date": None})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
