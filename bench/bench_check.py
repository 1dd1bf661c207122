"""How long checking a thesis's references takes (issue 27: a 500-citation thesis fully checked
within 5 s on 2 cores), through the same checker the language server and ``citewise check`` run.

The thesis is made of real text: the citing sentences of the ACM-CR dev papers, each with a
``\\cite{...}`` of the DOIs it cites (ACM-CR keys its entries by DOI) where its first marker was,
repeated paper after paper until ``--citations`` keys are cited; its ``.bib`` holds the original
ACM-CR entries of those papers. Measured on the full ACM-CR store (110k papers):

* ``cold``: a new checker (empty caches) checks the whole draft: every entry against the store,
  every citing context's fit (two BM25 passes over the collection each);
* ``after_edit``: one sentence of the draft changed, checked again by the same checker (what
  the server does after a keystroke pause);
* the findings found, per code.

With ``--lsp``, the same through ``citewise serve``: from ``didOpen`` of the thesis until the
server publishes its diagnostics for that version (the debounce, ``debounce_ms``, included; the
placeholder-free thesis has only check findings), first in a fresh server (cold caches), then for
each of ``--runs`` one-sentence edits (``didChange``).

Median of ``--runs`` runs, with the machine's load. Prints one JSON object.

    .venv/bin/python bench/bench_check.py --store STORE [--citations 500] [--runs 5] [--lsp]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import SHARED_DATA, machine, summary

from citewise.evaluation import protocol as ev
from citewise.indexer.store import Store
from citewise.models.recommender import Recommender
from citewise.server.citation_checks import ReferenceChecker
from citewise.server.documents import analyze
from citewise.settings import Settings

DATA = SHARED_DATA / "acm-cr"
_MARKERS = re.compile(ev._NUMERIC_MARKER.pattern + "|" + ev._AUTHOR_YEAR.pattern)


def make_thesis(folder: Path, store: Store, citations: int) -> tuple[Path, int, int]:
    """Write thesis.tex and refs.bib; returns (draft path, keys cited, distinct entries)."""
    collection = {doi for (doi,) in store.conn.execute("SELECT doi FROM papers WHERE doi != ''")}
    paras: list[str] = []
    cited: list[str] = []
    while len(cited) < citations:
        before = len(cited)
        for f in sorted(DATA.joinpath("dev").rglob("*.xml")):
            paper = ev.read_citing_paper(f)
            for _qid, sentence, ids in paper.sentences:
                dois = [paper.refs.get(i, "") for i in ids]
                dois = [d for d in dois if d in collection]
                if not dois or len(cited) >= citations:
                    continue
                text = _MARKERS.sub("", sentence, count=1)
                text = re.sub(r"([%&#$_{}~^\\])", " ", _MARKERS.sub("", text))
                cut = text.rfind(".") if text.rstrip().endswith(".") else len(text)
                paras.append(text[:cut].rstrip() + " \\cite{" + ",".join(dois) + "}" + text[cut:])
                cited += dois
        if len(cited) == before:
            sys.exit("no ACM-CR dev sentence cites a paper of this store")
    entries = []
    for doi in dict.fromkeys(cited):
        p = store.find(doi=doi)
        if p is not None and p.bibtex:
            entries.append(p.bibtex.strip())
    (folder / "refs.bib").write_text("\n\n".join(entries) + "\n", encoding="utf-8")
    body = "\n\n".join(paras)
    draft = folder / "thesis.tex"
    draft.write_text(
        "\\documentclass{article}\n\\title{Interactive information retrieval}\n\\begin{document}\n"
        + body
        + "\n\\bibliography{refs}\n\\end{document}\n",
        encoding="utf-8",
    )
    return draft, len(cited), len(entries)


class _Published:
    """When the server published diagnostics for each version, and their codes (wrapping the
    handler pytest-lsp registers, as tests/lsp_harness.py does)."""

    def __init__(self, client) -> None:
        from lsprotocol import types

        self.at: dict[int, float] = {}
        self.codes: dict[int, Counter[str]] = {}
        features = client.protocol.fm.features
        self._publish = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]
        features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = self._record

    def _record(self, params) -> None:
        if params.version is not None and params.diagnostics:
            self.at.setdefault(params.version, time.perf_counter())
            self.codes[params.version] = Counter(str(d.code) for d in params.diagnostics)
        self._publish(params)

    async def wait(self, version: int, since: float) -> float:
        import asyncio

        while version not in self.at:
            if time.perf_counter() - since > 120:
                raise SystemExit(f"no diagnostics for version {version} after 120 s")
            await asyncio.sleep(0.005)
        return self.at[version] - since


async def _ready_server(store: Path, root: Path):
    """``citewise serve`` on the store, initialised, once it says it is ready."""
    import asyncio

    from lsprotocol import types
    from pygls.uris import from_fs_path
    from pytest_lsp import ClientServerConfig, client_capabilities

    cfg = ClientServerConfig(
        server_command=[sys.executable, "-m", "citewise.cli", "serve", "--store", str(store)]
    )
    client = await cfg.start()
    client.feature(types.CLIENT_REGISTER_CAPABILITY)(lambda params: None)
    published = _Published(client)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=from_fs_path(str(root)),
            initialization_options={"importWorkspaceBibs": False},
        )
    )
    t0 = time.monotonic()
    while not any("citewise ready" in m.message for m in client.log_messages):
        if time.monotonic() - t0 > 600:
            raise SystemExit("server not ready after 600 s")
        await asyncio.sleep(0.1)
    return client, published


async def through_server(store: Path, draft: Path, runs: int) -> dict:
    """Seconds from didOpen (then from each didChange) to the diagnostics of that version."""
    from lsprotocol import types
    from pygls.uris import from_fs_path

    client, published = await _ready_server(store, draft.parent)
    uri, text = from_fs_path(str(draft)), draft.read_text(encoding="utf-8")
    t = time.perf_counter()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="latex", version=1, text=text)
        )
    )
    cold = await published.wait(1, t)
    edits = []
    for v in range(2, runs + 2):
        i = text.index("\\cite{", len(text) * v // (runs + 3))
        text = text[:i] + "as shown before " + text[i:]
        t = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=v, uri=uri),
                [types.TextDocumentContentChangeWholeDocument(text)],
            )
        )
        edits.append(await published.wait(v, t))
    await client.shutdown_session()
    await client.stop()
    return {
        "debounce_ms": Settings().debounce_ms,
        "open_to_diagnostics": summary([cold]),
        "edit_to_diagnostics": summary(edits),
        "diagnostics": dict(published.codes[1]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--store", required=True, help="a store of ACM-CR (citewise index ../shared/data/acm-cr/acm-dl)"
    )
    ap.add_argument("--citations", type=int, default=500)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--lsp", action="store_true", help="also through citewise serve")
    args = ap.parse_args()
    store = Store(args.store, create=False)
    t0 = time.perf_counter()
    rec = Recommender(store, build_missing=False, use_dense=False)
    load_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        draft, n_cited, n_entries = make_thesis(Path(tmp), store, args.citations)
        text = draft.read_text(encoding="utf-8")
        cold, edit = [], []
        found: Counter[str] = Counter()
        for _ in range(args.runs):
            view = analyze(draft, text, "latex")
            checker = ReferenceChecker(rec)
            t = time.perf_counter()
            result = checker.check(view)
            cold.append(time.perf_counter() - t)
            found = Counter(f.finding.code for f in result)
            i = text.index("\\cite{", len(text) // 2)
            edited = text[:i] + "and, as shown before, " + text[i:]
            view2 = analyze(draft, edited, "latex")
            t = time.perf_counter()
            checker.check(view2)
            edit.append(time.perf_counter() - t)
        lsp = None
        if args.lsp:
            import asyncio

            lsp = asyncio.run(through_server(Path(args.store), draft, args.runs))
    print(
        json.dumps(
            {
                "bench": "check",
                "store_papers": store.count(),
                "index_load_s": round(load_s, 2),
                "citations": n_cited,
                "entries": n_entries,
                "contexts": text.count("\\cite{"),
                "cold": summary(cold),
                "after_edit": summary(edit),
                "findings": dict(found),
                "lsp": lsp,
                "machine": machine(),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
