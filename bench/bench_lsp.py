"""Latency and quality of citation completion measured THROUGH the language server.

Real ACM-CR dev citing papers (``shared/data/acm-cr/dev/**/*.xml``) become LaTeX drafts:
``\\title``, the ``abstract`` environment, then every citing sentence as its own paragraph,
markers removed. Then, like an author, the bench types a ``\\cite{}`` placeholder where each
sentence's first citation marker was (one ``didChange``) and immediately asks for completions:

* first-answer latency: the round trip of that first ``textDocument/completion`` (median, p95);
* time to the reranked list: from the ``didChange`` until a completion answers with
  ``isIncomplete: false`` (the background full ranking served from the speculative cache);
* R@10 of that final list against the sentence's cited DOIs, next to R@10 of the same
  recommender called directly on the same context (the server must add no loss) and on the
  evaluation protocol's own context (the bare sentence, as ``citewise eval`` uses).

The citing papers themselves (``blacklist.txt``) are removed from every list before scoring,
as the evaluation removes them from the collection. Prints one JSON object, with the machine's
load average (2 shared cores: latencies depend on what else runs).

    .venv/bin/python bench/bench_lsp.py --store STORE [--papers N] [--queries N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from _common import SHARED_DATA
from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from citewise.evaluation import protocol as ev
from citewise.indexer.records import normalize_doi
from citewise.models.query import ContextQuery, marked_query
from citewise.settings import Settings

if TYPE_CHECKING:
    from citewise.models.recommender import Recommender

DATA = SHARED_DATA / "acm-cr"
_MARKER = re.compile(ev._NUMERIC_MARKER.pattern + "|" + ev._AUTHOR_YEAR.pattern)


def tex_escape(s: str) -> str:
    s = s.replace("\\", " ").replace("~", " ").replace("^", " ")
    return re.sub(r"([%&#$_{}])", r"\\\1", s)


def make_draft(path: Path, max_queries: int, collection: set[str] | None) -> tuple[str, list[dict]]:
    """The draft text (no placeholders yet) and, per query, where its ``\\cite{}`` goes.

    Each ``<context>`` of the paper becomes a paragraph of all its sentences (markers removed),
    so a placeholder has the real surrounding text; the queries are the sentences the
    evaluation uses (cited DOIs in the collection), the first ``max_queries`` of the paper.
    """
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    title = ev._text(root.find("title"))
    abstract = ev._text(root.find("abstract"))
    refs = {r.get("id", ""): normalize_doi(ev._text(r)) for r in root.iter("reference")}
    text = f"\\documentclass{{article}}\n\\title{{{tex_escape(title)}}}\n\\begin{{document}}\n\\maketitle\n"
    text += f"\\begin{{abstract}}\n{tex_escape(abstract)}\n\\end{{abstract}}\n\n"
    out: list[dict] = []
    for ctx in root.iter("context"):
        for s in ctx.iter("s"):
            sentence = ev._text(s)
            cites = s.get("cites")
            dois = {refs.get(c.strip(), "") for c in cites.split(",")} - {""} if cites else set()
            if collection is not None:
                dois &= collection
            m = _MARKER.search(sentence)
            if dois and len(out) < max_queries:
                before = (
                    ev.strip_citation_markers(sentence[: m.start()])
                    if m
                    else ev.strip_citation_markers(sentence)
                )
                after = ev.strip_citation_markers(sentence[m.end() :]) if m else ""
                text += tex_escape(before) + " "
                out.append(
                    {
                        "offset": len(text),
                        "relevant": dois,
                        "query": ContextQuery(ev.strip_citation_markers(sentence), title, abstract),
                    }
                )
                text += tex_escape(after) + " "
            else:
                text += tex_escape(ev.strip_citation_markers(sentence)) + " "
        text = text.rstrip() + "\n\n"
    text += "\\end{document}\n"
    return text, out


def position(text: str, offset: int) -> types.Position:
    """LSP position (UTF-16 code units: ACM-CR sentences have math letters outside the BMP)."""
    from citewise.server.draft import LineIndex

    return types.Position(*LineIndex(text).position(offset))


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))] if xs else float("nan")


@dataclass
class _Tally:
    """What the bench measures over all placeholders, gathered as the drafts are typed."""

    first_ms: list[float] = field(default_factory=list)
    reranked_ms: list[float] = field(default_factory=list)
    first_incomplete: int = 0
    r10_lsp: list[float] = field(default_factory=list)
    r10_direct: list[float] = field(default_factory=list)
    r10_sentence: list[float] = field(default_factory=list)
    timeouts: int = 0
    missed: list[str] = field(default_factory=list)
    n_q: int = 0


@dataclass
class _Bench:
    """One running server and what scoring its answers needs (the store's DOIs, the blacklist and
    the same recommender in-process, for the direct comparison)."""

    args: argparse.Namespace
    client: LanguageClient
    rec: Recommender
    doi_of: dict[int, str]
    blacklist: set[str]
    tally: _Tally = field(default_factory=_Tally)

    async def type_draft(self, doc: Path, text: str, slots: list[dict]) -> None:
        """Open ``doc`` with ``text`` and, like an author, type a ``\\cite{}`` at each slot (one
        ``didChange``), then ask for completions there; the placeholders stay in the text, so each
        later slot is shifted by the ones typed before it."""
        uri = from_fs_path(str(doc))
        version = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(uri=uri, language_id="latex", version=version, text=text)
            )
        )
        shift = 0
        for slot in slots:
            off = slot["offset"] + shift
            text = text[:off] + "\\cite{}" + text[off:]
            shift += len("\\cite{}")
            version += 1
            await self.complete_at(uri, version, text, off + len("\\cite{"), slot)
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
        )

    async def complete_at(self, uri: str, version: int, text: str, cursor: int, slot: dict) -> None:
        """Send the edit, time the first answer, then poll until the reranked (complete) list is
        served or ``--timeout`` passes, and score it; a placeholder where the server sees no
        citation is recorded (with its surroundings) rather than crashing the run."""
        args, tally = self.args, self.tally
        t_change = time.perf_counter()
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                [types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        params = types.CompletionParams(types.TextDocumentIdentifier(uri), position(text, cursor))
        t1 = time.perf_counter()
        result = await self.client.text_document_completion_async(params)
        tally.first_ms.append(1000 * (time.perf_counter() - t1))
        if result is None:  # the scanner did not see a citation here: report, do not crash
            tally.missed.append(text[max(0, cursor - 80) : cursor + 20])
            return
        tally.first_incomplete += bool(result.is_incomplete)
        while result.is_incomplete and time.perf_counter() - t_change < args.timeout:
            await asyncio.sleep(args.poll / 1000)
            result = await self.client.text_document_completion_async(params)
        if result.is_incomplete:
            tally.timeouts += 1
        tally.reranked_ms.append(1000 * (time.perf_counter() - t_change))
        ranked = [self.doi_of.get(it.data["paperId"], "") for it in result.items]
        ranked = [d for d in ranked if d not in self.blacklist]
        tally.r10_lsp.append(ev.query_metrics(ranked, slot["relevant"])["R@10"])
        self.score_direct(text, cursor, slot)
        tally.n_q += 1

    def score_direct(self, text: str, cursor: int, slot: dict) -> None:
        """R@10 of the same recommender called in-process, on the context the server reads and on
        the evaluation's bare sentence: any gap to the LSP figure is a loss the server adds."""
        from citewise.server import draft as draft_mod

        # The marked context: the server's query knows where the placeholder is (issue 16).
        view_ctx = draft_mod.marked_local_context(text, cursor, "latex", self.args.context_chars)
        q = slot["query"]
        for context, sink in ((view_ctx, self.tally.r10_direct), (q.local, self.tally.r10_sentence)):
            direct = self.rec.recommend(marked_query(context, q.citing_title, q.citing_abstract), 20 + 10)
            dois = [normalize_doi(r.paper.doi) for r in direct if r.paper.doi not in self.blacklist][:20]
            sink.append(ev.query_metrics(dois, slot["relevant"])["R@10"])


async def run(args: argparse.Namespace) -> dict:
    from citewise.indexer.store import Store
    from citewise.models.recommender import Recommender

    store = Store(args.store, create=False)
    blacklist = ev.load_blacklist(DATA / "blacklist.txt") if (DATA / "blacklist.txt").exists() else set()
    doi_of = dict(store.conn.execute("SELECT id, doi FROM papers").fetchall())
    collection = {d for d in doi_of.values() if d and d not in blacklist}
    papers = sorted((DATA / "dev").rglob("*.xml"))[: args.papers]
    rec = Recommender(store)
    ws = Path(tempfile.mkdtemp(prefix="citewise-bench-"))
    client, ready_s = await _start_server(args, ws)
    bench = _Bench(args, client, rec, doi_of, blacklist)
    for pi, path in enumerate(papers):
        text, slots = make_draft(path, args.queries, collection)
        if slots:
            await bench.type_draft(ws / f"paper{pi}.tex", text, slots)
    await client.shutdown_session()
    await client.stop()
    return _report(args, bench.tally, len(doi_of), len(papers), ready_s)


async def _start_server(args: argparse.Namespace, ws: Path) -> tuple[LanguageClient, float]:
    """Start ``citewise serve`` on the store and wait for its "citewise ready" log message; returns
    the client and the seconds to ready (a bench figure of its own: loading the model and indexes)."""
    cfg = ClientServerConfig(
        server_command=[sys.executable, "-m", "citewise.cli", "serve", "--store", str(args.store)]
    )
    client = await cfg.start()
    client.feature(types.CLIENT_REGISTER_CAPABILITY)(lambda params: None)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=from_fs_path(str(ws)),
            initialization_options={
                "importWorkspaceBibs": False,
                "k": 20,
                "contextChars": args.context_chars,
            },
        )
    )
    t0 = time.monotonic()
    while not any("citewise ready" in m.message for m in client.log_messages):
        if time.monotonic() - t0 > 600:
            raise SystemExit("server not ready after 600 s")
        await asyncio.sleep(0.1)
    return client, time.monotonic() - t0


def _report(
    args: argparse.Namespace, tally: _Tally, papers_in_store: int, citing_papers: int, ready_s: float
) -> dict:
    """The bench's JSON object: latencies as median/p95, recalls as means, with the load average."""

    def mean(xs: list[float]) -> float:
        return round(sum(xs) / len(xs), 4) if xs else float("nan")

    first_ms, reranked_ms = tally.first_ms, tally.reranked_ms
    return {
        "store": str(args.store),
        "papers_in_store": papers_in_store,
        "citing_papers": citing_papers,
        "queries": tally.n_q,
        "server_ready_s": round(ready_s, 2),
        "first_answer_ms": {
            "median": round(statistics.median(first_ms), 1),
            "p95": round(pct(first_ms, 0.95), 1),
            "max": round(max(first_ms), 1),
        },
        "first_answer_incomplete_share": round(tally.first_incomplete / max(1, tally.n_q), 3),
        "reranked_served_ms": {
            "median": round(statistics.median(reranked_ms), 1),
            "p95": round(pct(reranked_ms, 0.95), 1),
        },
        "reranked_timeouts": tally.timeouts,
        "no_citation_at_cursor": tally.missed[:5],
        "R@10": {
            "through_lsp": mean(tally.r10_lsp),
            "direct_same_context": mean(tally.r10_direct),
            "direct_eval_sentence_context": mean(tally.r10_sentence),
        },
        "settings": {"context_chars": args.context_chars, "poll_ms": args.poll, "k": 20},
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--store",
        required=True,
        type=Path,
        help="store holding the ACM-CR collection (not modified; the server keeps teacher vectors beside it)",
    )
    p.add_argument("--papers", type=int, default=10, help="citing papers to open (default 10)")
    p.add_argument("--queries", type=int, default=10, help="placeholders per paper (default 10)")
    p.add_argument("--context-chars", type=int, default=Settings().context_chars)
    p.add_argument("--poll", type=float, default=20.0, help="ms between completion requests while incomplete")
    p.add_argument("--timeout", type=float, default=10.0, help="s to wait for the reranked list")
    p.add_argument(
        "--cold-teacher",
        action="store_true",
        help="first remove the teacher's paper vectors kept beside the store (<store>.teacher/), so the "
        "server starts as the first one on this store does",
    )
    args = p.parse_args()
    if not args.store.exists():
        raise SystemExit(
            f"{args.store}: no such store (build one with `citewise index shared/data/acm-cr/acm-dl`)"
        )
    if args.cold_teacher:
        import shutil

        shutil.rmtree(args.store.with_name(args.store.name + ".teacher"), ignore_errors=True)
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
