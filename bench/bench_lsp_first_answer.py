"""The first completion after the editor starts the server: how soon, and ranked by the sentence? (JSON)

A draft whose sentence paraphrases the title of the LAST entry of its ``.bib`` (N real ACM-CR
entries with abstracts, as a reference manager exports them), completed right after
``initialize``, without waiting for the server to say it is ready: the store is still opening
(or there is none). Reported per case: the seconds from ``didOpen`` to the first answer, whether
that answer's first item is the entry the sentence describes (ranked, not the file's order), the
file's first key for contrast, and the same for the answer once the store is open.

    python bench/bench_lsp_first_answer.py --entries 100,1000 --runs 3 [--store STORE]

Without ``--store`` the server starts with no store at all (a new user's first run); with it, on
that store (opened read-write by the server, as an editor would: pass a copy if it matters).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402
from bench_bib_index import real_bib  # noqa: E402
from lsprotocol import types  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402
from pytest_lsp import ClientServerConfig, client_capabilities  # noqa: E402

from citewise.server.bibfiles import bib_keys  # noqa: E402
from citewise.server.bibindex import BibIndex  # noqa: E402


def draft_for(bib_text: str) -> tuple[str, str]:
    """A draft citing the last entry's topic in its own words (its title's words, reordered), and
    that entry's key."""
    index = BibIndex.from_texts([("refs.bib", bib_text)])
    key = list(index.entries)[-1]
    words = re.findall(r"[A-Za-z]{4,}", index.entries[key].title)
    sentence = "We build on work about " + " ".join(reversed(words)) + " \\cite{}."
    return f"\\title{{Notes}}\n{sentence}\n\\bibliography{{refs}}\n", key


async def one(bib_text: str, store: Path | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        (root / "refs.bib").write_text(bib_text)
        draft, want = draft_for(bib_text)
        store_path = store if store is not None else Path(tmp) / "new-home" / "papers.sqlite"
        cmd = [sys.executable, "-m", "citewise.cli", "serve", "--store", str(store_path)]
        if store is None:
            (Path(tmp) / "new-home").mkdir()
        client = await ClientServerConfig(server_command=cmd).start()
        client.feature(types.CLIENT_REGISTER_CAPABILITY)(lambda _p: None)
        await client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                root_uri=from_fs_path(str(root)),
                initialization_options={"rerank": False},
            )
        )
        uri = from_fs_path(str(root / "draft.tex"))
        line = draft.split("\n")[1]
        pos = types.Position(1, line.index("\\cite{") + len("\\cite{"))
        t0 = time.perf_counter()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "latex", 1, draft))
        )
        params = types.CompletionParams(types.TextDocumentIdentifier(uri), pos)
        first = await client.text_document_completion_async(params)
        first_s = time.perf_counter() - t0
        ready_at = None
        while time.perf_counter() - t0 < 120:
            if any("citewise ready" in m.message for m in client.log_messages):
                ready_at = time.perf_counter() - t0
                break
            await asyncio.sleep(0.05)
        later = await client.text_document_completion_async(params)
        await client.shutdown_session()
        await client.stop()
    labels = [i.label for i in first.items]
    return {
        "first_answer_s": round(first_s, 3),
        "first_items": len(labels),
        "first_is_the_entry": bool(labels) and labels[0] == want,
        "first_labels": labels[:3],
        "file_order_first": next(iter(bib_keys(bib_text)), ""),
        "store_ready_after_s": ready_at and round(ready_at, 2),
        "later_is_the_entry": bool(later.items) and later.items[0].label == want,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", default="100,1000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--store", type=Path, default=None)
    args = ap.parse_args()
    out: dict = {"machine_before": machine(), "store": str(args.store) if args.store else None, "cases": []}
    for n in (int(x) for x in args.entries.split(",")):
        text = real_bib(n)
        runs = [asyncio.run(one(text, args.store)) for _ in range(args.runs)]
        out["cases"].append(
            {
                "entries": n,
                "first_answer_median_s": statistics.median(r["first_answer_s"] for r in runs),
                "first_is_the_entry": sum(r["first_is_the_entry"] for r in runs),
                "runs": runs,
            }
        )
    out["machine_after"] = machine()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
