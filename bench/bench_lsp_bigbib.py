"""A large ``.bib`` beside the draft, through the real server: does completion stay instant? (JSON)

The ``.bib`` holds the first N real ACM-CR entries (with abstracts, as reference managers
export them; 50,000 entries are about 72 MB). The server starts on a small store
(``examples/library.bib``) with the default settings (the workspace ``.bib`` is also imported
into the store in the background). Measured from ``didOpen`` of the draft: the first
completion answer, then ten more completions (keystroke latency, median), and the time until
a key of the big ``.bib`` is offered (its index is ready).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from citewise.server.bibfiles import bib_keys  # noqa: E402
from tests.lsp.test_lsp_burst import build_store  # noqa: E402

DRAFT = "\\title{Query expansion}\nPseudo relevance feedback expands the query with terms of the top documents \\cite{}.\n\\bibliography{refs}\n"


async def start_ready_server(store: Path, root: Path) -> LanguageClient:
    """Start ``citewise serve`` on ``store`` with ``root`` as the workspace, and return its client
    once the server logs that it is ready, so that server start-up is not counted in the timings."""
    cfg = ClientServerConfig(
        server_command=[sys.executable, "-m", "citewise.cli", "serve", "--store", str(store)]
    )
    client = await cfg.start()
    client.feature(types.CLIENT_REGISTER_CAPABILITY)(lambda _p: None)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"), root_uri=from_fs_path(str(root))
        )
    )
    while not any("citewise ready" in m.message for m in client.log_messages):
        await asyncio.sleep(0.02)
    return client


async def one(n: int, bib_text: str, key: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        (root / "refs.bib").write_text(bib_text)
        client = await start_ready_server(build_store(Path(tmp)), root)
        uri = from_fs_path(str(root / "draft.tex"))
        line, char = 1, DRAFT.split("\n")[1].index("\\cite{") + len("\\cite{")

        async def complete(text_char: int) -> types.CompletionList:
            return await client.text_document_completion_async(
                types.CompletionParams(types.TextDocumentIdentifier(uri), types.Position(line, text_char))
            )

        t0 = time.perf_counter()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "latex", 1, DRAFT))
        )
        first = await complete(char)
        first_s = time.perf_counter() - t0
        keystrokes = []
        for _ in range(10):
            t = time.perf_counter()
            await complete(char)
            keystrokes.append(time.perf_counter() - t)
        typed = DRAFT.replace("\\cite{}", "\\cite{" + key)
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=2, uri=uri),
                [types.TextDocumentContentChangeWholeDocument(typed)],
            )
        )
        own_s = None
        while time.perf_counter() - t0 < 300:
            res = await complete(char + len(key))
            if any(i.label == key for i in res.items):
                own_s = time.perf_counter() - t0
                break
            await asyncio.sleep(0.1)
        await client.shutdown_session()
        await client.stop()
        return {
            "entries": n,
            "first_answer_s": round(first_s, 3),
            "first_items": len(first.items),
            "keystroke_median_ms": round(1000 * statistics.median(keystrokes), 1),
            "keystroke_max_ms": round(1000 * max(keystrokes), 1),
            "own_key_offered_after_s": own_s and round(own_s, 2),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="5000,20000,50000")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    out = {"machine_before": machine(), "sizes": []}
    for n in (int(x) for x in args.sizes.split(",")):
        text = real_bib(n)
        key = list(bib_keys(text))[-1]  # the last entry: indexed last
        runs = [asyncio.run(one(n, text, key)) for _ in range(args.runs)]
        out["sizes"].append(
            {
                "entries": n,
                "mb": round(len(text.encode()) / 1e6, 1),
                "runs": runs,
                "first_answer_median_s": statistics.median(r["first_answer_s"] for r in runs),
            }
        )
    out["machine_after"] = machine()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
