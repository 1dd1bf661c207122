"""A 50k-paper ``.bib`` added to a big store, through the real server: does completion stay instant,
and is the search index layered (a delta) rather than rebuilt? (JSON)

The store is a copy of ``--store`` (e.g. the 1M-paper store of ``bench/bench_scale.py``); the
``.bib`` is written from generated papers the store does not hold (``bench/make_scale_corpus.py
--id-prefix new``). The server starts with the default settings, so it imports the workspace's
``.bib`` into the store in the background. From ``didOpen`` of a draft, a completion is asked
every 0.25 s until the server logs that the new index is swapped in: their latencies (median,
p95, max) are the keystroke latencies during the import; then a sentence made of a new paper's
title must find that paper (the store's search index serves the new papers).

    python bench/bench_add_bib_to_big_store.py --store runs/scale/store.sqlite --jsonl runs/scale/new50k.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402
from bench_lsp_bigbib import start_ready_server  # noqa: E402
from lsprotocol import types  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402


def bib_from_jsonl(path: Path, n: int) -> tuple[str, list[dict]]:
    """BibTeX entries (with abstracts, as reference managers export them) of the first ``n`` records."""
    records = []
    with path.open(encoding="utf-8") as f:
        for _, line in zip(range(n), f, strict=False):
            records.append(json.loads(line))

    def esc(s: str) -> str:
        return s.replace("{", "(").replace("}", ")").replace("\\", " ")

    entries = [
        f"@inproceedings{{{r['id']},\n  title = {{{esc(r['title'])}}},\n"
        f"  author = {{{' and '.join(esc(a) for a in r['authors'])}}},\n  year = {{{r['year']}}},\n"
        f"  booktitle = {{{esc(r['venue'])}}},\n  doi = {{{r['doi']}}},\n"
        + (f"  abstract = {{{esc(r['abstract'])}}},\n" if r.get("abstract") else "")
        + "}\n"
        for r in records
    ]
    return "\n".join(entries), records


async def run(store: Path, bib_text: str, probe: dict, timeout: float) -> dict:
    root = store.parent / "ws"
    root.mkdir()
    (root / "refs.bib").write_text(bib_text, encoding="utf-8")
    draft = "\\title{Draft}\nWe build on prior work \\cite{}.\n\\bibliography{refs}\n"
    uri = from_fs_path(str(root / "draft.tex"))
    client = await start_ready_server(store, root)
    t0 = time.perf_counter()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "latex", 1, draft))
    )
    pos = types.Position(1, draft.split("\n")[1].index("\\cite{") + len("\\cite{"))
    latencies, swapped_s = [], None
    while time.perf_counter() - t0 < timeout and swapped_s is None:
        t = time.perf_counter()
        await client.text_document_completion_async(
            types.CompletionParams(types.TextDocumentIdentifier(uri), pos)
        )
        latencies.append(time.perf_counter() - t)
        if any("index swapped" in m.message for m in client.log_messages):
            swapped_s = time.perf_counter() - t0
        await asyncio.sleep(0.25)
    swap_log = [m.message for m in client.log_messages if "index swapped" in m.message]
    text = draft.replace("We build on prior work", probe["title"].replace("\\", " "), 1)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=2, uri=uri),
            [types.TextDocumentContentChangeWholeDocument(text)],
        )
    )
    pos = types.Position(1, text.split("\n")[1].index("\\cite{") + len("\\cite{"))
    found = None
    for _ in range(40):
        res = await client.text_document_completion_async(
            types.CompletionParams(types.TextDocumentIdentifier(uri), pos)
        )
        labels = [i.label for i in res.items]
        if probe["id"] in labels:
            found = labels.index(probe["id"]) + 1
            if not res.is_incomplete:
                break
        await asyncio.sleep(0.25)
    await client.shutdown_session()
    await client.stop()
    ms = sorted(1000 * x for x in latencies)
    return {
        "completions_during_import": len(ms),
        "keystroke_median_ms": round(statistics.median(ms), 1),
        "keystroke_p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 1),
        "keystroke_max_ms": round(ms[-1], 1),
        "index_swapped_after_s": swapped_s and round(swapped_s, 1),
        "swap_log": swap_log,
        "new_paper_rank_for_its_title": found,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True, help="the big store (copied, never changed)")
    ap.add_argument(
        "--jsonl", required=True, help="papers the store does not hold (make_scale_corpus --id-prefix new)"
    )
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--timeout", type=float, default=900.0)
    args = ap.parse_args()
    bib_text, records = bib_from_jsonl(Path(args.jsonl), args.entries)
    src = Path(args.store)
    with tempfile.TemporaryDirectory(dir=src.parent) as tmp:
        store = Path(tmp) / src.name
        shutil.copyfile(src, store)
        shutil.copytree(src.with_name(src.name + ".bm25"), store.with_name(store.name + ".bm25"))
        out = {"machine_before": machine(), "entries": len(records), "bib_mb": round(len(bib_text) / 1e6, 1)}
        out.update(asyncio.run(run(store, bib_text, records[len(records) // 2], args.timeout)))
    out["machine_after"] = machine()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
