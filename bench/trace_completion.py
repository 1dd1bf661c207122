"""Which citewise modules one completion request crosses (a new version of the draft: analysis,
ranking, items), in call order, with call counts. Prints JSON. Uses examples/library.bib."""

import asyncio
import collections
import json
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lsprotocol import types

from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store
from citewise.server import jobs
from citewise.server.handlers import completion
from citewise.server.lsp import create_server

tmp = Path(tempfile.mkdtemp())
store = Store(tmp / "s.sqlite")
import_sources(store, [str(Path(__file__).resolve().parents[1] / "examples" / "library.bib")])
store.close()
(tmp / "refs.bib").write_text("@article{own2020,\n  title = {Mine},\n}\n")
ls = create_server(str(tmp / "s.sqlite"))
ls.protocol.client_capabilities = types.ClientCapabilities()
seen: dict[str, int] = collections.OrderedDict()


def tracer(frame, event, arg):
    if event == "call":
        mod = frame.f_globals.get("__name__", "")
        if mod.startswith("citewise"):
            seen[mod] = seen.get(mod, 0) + 1
    return None


async def main():
    ls.loop = asyncio.get_running_loop()
    ls.show = lambda *a, **k: None
    ls.log_info = lambda *a: None
    ls.protocol._workspace = None
    from pygls.workspace import Workspace

    ws = Workspace(tmp.as_uri())
    ls.protocol._workspace = ws
    await jobs.load_store(ls)
    uri = (tmp / "draft.tex").as_uri()
    text = "\\title{Retrieval}\nDense retrieval with dual encoders \\cite{}.\n\\bibliography{refs}\n"
    ws.put_text_document(types.TextDocumentItem(uri, "latex", 1, text))
    params = types.CompletionParams(
        types.TextDocumentIdentifier(uri), types.Position(1, text.split("\n")[1].index("{") + 1)
    )
    await completion.complete(ls, params)  # warm: analysis, indexes
    text = text.replace("Dense", "Sparse")
    ws.put_text_document(types.TextDocumentItem(uri, "latex", 2, text))
    params = types.CompletionParams(
        types.TextDocumentIdentifier(uri), types.Position(1, text.split("\n")[1].index("{") + 1)
    )
    threading.settrace(tracer)
    sys.settrace(tracer)
    # Fresh worker threads, so the tracer follows the work into them.
    ls.fast_pool, ls.analysis_pool = ThreadPoolExecutor(1), ThreadPoolExecutor(1)
    res = await completion.complete(ls, params)
    sys.settrace(None)
    threading.settrace(None)
    return len(res.items)


items = asyncio.run(main())
print(json.dumps({"items": items, "modules": len(seen), "calls_by_module": dict(seen)}, indent=2))
