"""``citewise serve`` (the language server) and ``citewise suggest DRAFT`` (the same ranking, in a terminal)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .cli_engine import add_engine_argument
from .settings import Settings, default_store_path

if TYPE_CHECKING:
    from collections.abc import Set as AbstractSet

    from citewise.indexer.store import Store
    from citewise.server.draft import Lang


def register(sub: argparse._SubParsersAction) -> None:
    store_help = f"paper store file (default: $CITEWISE_STORE or {default_store_path()})"
    p = sub.add_parser("serve", help="run the language server (stdio by default)")
    p.add_argument(
        "--tcp", metavar="[HOST:]PORT", help="listen on TCP instead of stdio (HOST defaults to 127.0.0.1)"
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --tcp on a non-loopback interface (clients must send initializationOptions.token)",
    )
    p.add_argument(
        "--token", help="token clients must present (default: $CITEWISE_TOKEN); needed with --allow-remote"
    )
    p.add_argument(
        "--stdio", action="store_true", help="use stdio (the default; accepted for editor configs)"
    )
    p.add_argument("--store", help=store_help)
    add_engine_argument(p)  # the default of the engine setting, as --store is the store's
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("suggest", help="suggest citations for a draft's placeholders and for the whole draft")
    p.add_argument("draft", metavar="DRAFT", help="a LaTeX or Markdown draft")
    p.add_argument("--store", help=store_help)
    p.add_argument(
        "-k", type=int, default=5, help="suggestions per placeholder and for the draft (default 5)"
    )
    p.add_argument("--no-rerank", action="store_true", help="prefetch only (no second stage)")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_engine_argument(p)
    p.set_defaults(func=cmd_suggest)


def _parse_tcp(value: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``PORT``; a port outside 1-65535 is refused (not wrapped around)."""
    from .cli_common import UserError

    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UserError(
            f"--tcp {value!r}: expected [HOST:]PORT with a port from 1 to 65535, e.g. --tcp 127.0.0.1:2087"
        )
    return host, int(port)


def _check_bind(host: str, port: int) -> None:
    """Fail with one clear line when the address cannot be listened on (in use, unknown host)."""
    import socket

    from .cli_common import UserError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, kind, proto, _name, addr = infos[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
    except OSError as exc:
        raise UserError(
            f"--tcp {host}:{port}: cannot listen there ({exc.strerror or exc}); pick another port"
        ) from exc


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    from citewise.server.lsp import serve
    from citewise.server.transport import is_loopback

    from .cli_common import UserError

    tcp = _parse_tcp(args.tcp) if args.tcp else None
    token = args.token or os.environ.get("CITEWISE_TOKEN") or None
    if tcp is not None:
        if not is_loopback(tcp[0]):
            if not args.allow_remote:
                raise UserError(
                    f"--tcp {tcp[0]}: not a loopback address; anyone who can reach it could read your "
                    "store and drafts. Add --allow-remote and --token SECRET (or $CITEWISE_TOKEN) if you mean it"
                )
            if not token:
                raise UserError(
                    "--allow-remote needs a token: --token SECRET or $CITEWISE_TOKEN "
                    "(clients send it as initializationOptions.token)"
                )
        _check_bind(*tcp)
    elif args.allow_remote:
        raise UserError("--allow-remote goes with --tcp HOST:PORT")
    if args.engine != "local":
        _default_engine(args.engine)
    if tcp is None:
        _say_stdio_in_a_terminal()
    serve(args.store, tcp, token if tcp is not None else None)
    return 0


def _say_stdio_in_a_terminal() -> None:
    """Run by hand in a terminal, the server would sit silent, waiting for LSP messages: say so on
    stderr (never stdout, the protocol's channel). An editor starting it gives it pipes: nothing."""
    import sys

    try:
        tty = sys.stdin.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        print(
            "citewise serve: the language server speaks LSP on stdin/stdout and waits for an editor "
            "to start it (set-up for each editor: docs/editors.md). Press Ctrl-C to stop. "
            "For suggestions in a terminal: citewise suggest DRAFT",
            file=sys.stderr,
            flush=True,
        )


def _default_engine(engine: str) -> None:
    """Make ``engine`` the default of the servers' ``engine`` setting: an editor that sets
    ``citewise.engine`` still chooses (``local`` included), one that does not gets the flag's.
    Done by wrapping ``create_server``, since ``serve`` takes no settings (server/lsp.py)."""
    from citewise.server import lsp

    make = lsp.create_server

    def create_server(store_path=None, token=None):
        server = make(store_path, token)
        server.settings = Settings(engine=engine)
        apply = server.apply_settings
        server.apply_settings = lambda data, base=None: apply(data, base or Settings(engine=engine))
        return server

    lsp.create_server = create_server


def cmd_suggest(args: argparse.Namespace) -> int:
    from citewise.models.draft_suggest import suggest_for_draft
    from citewise.models.recommender import Recommender
    from citewise.server.bibindex import key_for_paper
    from citewise.server.documents import analyze, cited_paper_ids

    path, lang = _suggest_draft(args.draft)
    store = _suggest_store(args.store)
    settings = Settings()
    view = analyze(path.resolve(), path.read_text(encoding="utf-8", errors="replace"), lang)
    rec = Recommender(store, engine=args.engine)
    rerank = not args.no_rerank
    out: dict = {"draft": str(path), "title": view.title, "placeholders": [], "draft_suggestions": []}
    cited = cited_paper_ids(rec.library, view)
    for ph in view.placeholders(settings.context_chars):
        out["placeholders"].append(_placeholder_json(rec, view, ph, settings, args.k, rerank, cited))
    for s in suggest_for_draft(
        rec,
        view.title,
        view.abstract,
        view.body_text(),
        k=args.k,
        candidates=settings.candidates,
        exclude=cited,
        rerank=rerank,
    ):
        out["draft_suggestions"].append(
            _paper_json(
                s.paper, key_for_paper(s.paper, view.bib, settings.entry_style).key, s.score, s.reasons
            )
        )
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    _print_suggestions(path.name, out)
    return 0


def _suggest_draft(draft_arg: str) -> tuple[Path, Lang]:
    """The draft's path and language, checked up front so that a wrong path or file type is a
    one-line error rather than a traceback (or an empty answer) after the store is loaded."""
    from citewise.server import draft

    from .cli_common import UserError

    path = Path(draft_arg).expanduser()
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    lang = draft.language_for(str(path))
    if lang is None:
        raise UserError(f"{path}: not a LaTeX or Markdown draft (.tex, .md, .qmd, .Rmd ...)")
    return path, lang


def _suggest_store(store_arg: str | None) -> Store:
    """The paper store to rank from; a missing or empty store is a one-line error that says how to
    make one, since suggestions from nothing would look like a silent failure."""
    from citewise.indexer.store import Store

    from .cli_common import UserError

    store_path = Path(store_arg).expanduser() if store_arg else default_store_path()
    if not store_path.exists():
        raise UserError(f"{store_path}: no paper store here (run `citewise index SOURCE` first)")
    store = Store(store_path, create=False)
    if store.count() == 0:
        raise UserError(f"{store_path}: the store is empty (run `citewise index SOURCE` first)")
    return store


def _placeholder_json(
    rec, view, ph, settings: Settings, k: int, rerank: bool, cited: AbstractSet[int] = frozenset()
) -> dict:
    """One placeholder's position, text and top ``k`` suggestions. It asks for ``k`` more than the
    keys already in the citation, because those are dropped (citing a paper twice in one citation is
    a mistake), so that ``k`` are still left."""
    from citewise.models.focus import focus_query
    from citewise.server.bibindex import key_for_paper

    line, char = view.lines.position(ph.citation.start)
    query = view.query_for(ph.marked)
    recs = rec.recommend(
        query,
        k + len(ph.citation.keys),
        candidates=settings.candidates,
        rerank=rerank,
        cited=cited,  # the draft's citations lift the papers often cited beside them
    )
    same_citation = {c.key for c in ph.citation.keys if not c.placeholder}  # citing twice is a mistake
    suggestions: list[dict] = []
    for r in recs:
        key = key_for_paper(r.paper, view.bib, settings.entry_style).key
        if key not in same_citation and len(suggestions) < k:
            suggestions.append(_paper_json(r.paper, key, r.candidate.score, [r.reason()]))
    return {
        "line": line + 1,
        "column": char + 1,
        "marker": view.text[ph.citation.start : ph.citation.end],
        "context": ph.context,
        # The words the placeholder is ranked by: its own clause where the sentence cites others.
        "clause": (clause := focus_query(query)).local,
        "clauseAt": clause.at,  # where the placeholder stands in it (-1: not known)
        "suggestions": suggestions,
    }


def _print_suggestions(name: str, out: dict) -> None:
    """The text report of ``citewise suggest``: written from the same ``out`` as ``--json``, so
    the two never disagree."""
    w = sys.stdout.write
    if not out["placeholders"]:
        w("no citation placeholders (\\cite{}, \\cite{?}, [@?] ...) in the draft\n")
    for ph in out["placeholders"]:
        w(
            f"{name}:{ph['line']}:{ph['column']}: {ph['marker']}  \u2014 \u201c{_clip(ph['clause'], ph['clauseAt'])}\u201d\n"
        )
        for i, s in enumerate(ph["suggestions"], 1):
            w(f"  {i}. {s['key']}: {s['title']} ({s['year'] or 'n.d.'})\n")
    w("\nFor the whole draft:\n")
    for i, s in enumerate(out["draft_suggestions"], 1):
        why = "; ".join(s["reasons"])
        w(f"  {i}. {s['key']}: {s['title']} ({s['year'] or 'n.d.'}){'  [' + why + ']' if why else ''}\n")


def _clip(text: str, at: int, before: int = 80, after: int = 40) -> str:
    """A long clause around its placeholder (at ``at``): the words before it, which a citation
    mostly supports, and a few after, cut with an ellipsis."""
    at = len(text) if at < 0 else at
    lo, hi = max(at - before, 0), min(at + after, len(text))
    return ("\u2026" if lo else "") + text[lo:hi].strip() + ("\u2026" if hi < len(text) else "")


def _paper_json(paper, key: str, score: float, reasons: list[str]) -> dict:
    return {
        "key": key,
        "paperId": paper.id,
        "title": paper.title,
        "year": paper.year,
        "authors": paper.authors,
        "venue": paper.venue,
        "doi": paper.doi or None,
        "score": round(score, 6),
        "reasons": [r for r in reasons if r],
    }
