"""How long the draft's ``.bib`` index takes for 5k, 20k and 50k real entries (JSON).

The ``.bib`` is made of real ACM-CR entries (with abstracts, as reference managers export
them), concatenated until the size is reached. Timed: the key scan (``bib_keys``) and the
identifier index (``BibIndex``) the server builds, in a worker thread, when a draft opens.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import SHARED_DATA, machine, summary  # noqa: E402

from citewise.server.bibfiles import bib_keys, iter_entries  # noqa: E402
from citewise.server.bibindex import BibIndex  # noqa: E402


def real_bib(n: int) -> str:
    """The first ``n`` entries of the ACM-CR export files, in a stable order."""
    parts: list[str] = []
    count = 0
    for path in sorted((SHARED_DATA / "acm-cr" / "acm-dl").rglob("*.bib")):
        text = path.read_text(encoding="utf-8", errors="replace")
        entries = list(iter_entries(text))
        for i, e in enumerate(entries):
            end = entries[i + 1].start if i + 1 < len(entries) else len(text)
            parts.append(text[e.start : end].rstrip() + "\n\n")
            count += 1
            if count >= n:
                return "".join(parts)
    raise SystemExit(f"only {count} entries under {SHARED_DATA}/acm-cr/acm-dl")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="5000,20000,50000")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    out = {"machine_before": machine(), "sizes": []}
    for n in (int(x) for x in args.sizes.split(",")):
        text = real_bib(n)
        keys_t, index_t = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            keys = bib_keys(text)
            keys_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            idx = BibIndex.from_texts([("library.bib", text)])
            index_t.append(time.perf_counter() - t)
        out["sizes"].append(
            {
                "entries": n,
                "distinct_keys": len(keys),
                "indexed": len(idx.entries),
                "mb": round(len(text.encode()) / 1e6, 1),
                "bib_keys": summary(keys_t),
                "bib_index": summary(index_t),
            }
        )
    out["machine_after"] = machine()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
