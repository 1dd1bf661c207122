"""``citewise check DRAFT...``: a draft's references checked against its ``.bib`` files and the
paper store (issue 27), reported compiler style or as JSON lines.

The checks themselves are :class:`citewise.server.citation_checks.ReferenceChecker`'s, the same
the language server shows as diagnostics; this module only reads the drafts, reports and picks
the exit status: 0 nothing worth a warning, 1 a warning-level finding or a broken ``.bib``
entry, 2 something could not be checked (a bad flag, no store, a draft that is missing or in a
format citewise does not read). It writes nothing: the store is only read, the draft's ``.bib``
is not imported into it, and a missing or stale search index is built in memory, not saved.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .cli_common import UserError, empty_store_error, open_store, positive_int
from .settings import Settings, default_store_path

if TYPE_CHECKING:
    from citewise.server.citation_checks import CitedFinding, ReferenceChecker
    from citewise.server.documents import DraftView
    from citewise.server.draft import Lang

# Broken entries reported per .bib file before "N more" (a file of broken entries is one mistake).
MAX_BIB_PROBLEMS = 5
# Exit statuses.
CLEAN, FOUND, NOT_CHECKED = 0, 1, 2


def register(sub: argparse._SubParsersAction) -> None:
    from citewise.models.checks.findings import CHECKS

    store_help = f"paper store file (default: $CITEWISE_STORE or {default_store_path()})"
    codes = ", ".join(f"{c}{'' if on else ' (off by default)'}" for c, (_s, on) in CHECKS.items())
    p = sub.add_parser(
        "check",
        help="check a draft's citations: unknown keys, made-up or mismatched entries, duplicates, "
        "papers that do not fit their sentence",
        description="Check the references a draft cites against its .bib files and the paper store. "
        f"Checks: {codes}. Exit status: 0 no warnings, 1 warnings (or broken .bib entries), "
        "2 something could not be checked.",
    )
    p.add_argument(
        "drafts", nargs="+", metavar="DRAFT", help="LaTeX or Markdown drafts (.tex, .md, .qmd, .Rmd ...)"
    )
    p.add_argument("--store", help=store_help)
    p.add_argument(
        "--bib",
        action="append",
        default=[],
        metavar="FILE",
        help="bibliography for a draft that names none (repeatable; default: references.bib beside the draft)",
    )
    for flag, what in (("--enable", "run"), ("--disable", "skip")):
        p.add_argument(
            flag,
            action="append",
            default=[],
            metavar="CODE",
            help=f"{what} this check (repeatable, or CODE,CODE)",
        )
    p.add_argument(
        "--context-chars",
        type=positive_int,
        metavar="N",
        default=Settings().context_chars,
        help="characters of text around a citation that the fit check reads (default %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per finding per line")
    p.set_defaults(func=cmd_check)


@dataclass
class Report:
    """What one run found, across its drafts."""

    checked: int = 0
    not_checked: int = 0
    counts: Counter = field(default_factory=Counter)  # findings per code
    worst: set[str] = field(default_factory=set)  # severities seen
    broken_entries: int = 0
    bibs_read: set[str] = field(default_factory=set)  # .bib files whose syntax was reported
    not_shown: int = 0  # findings past the per-draft cap (counted, not listed)

    def status(self) -> int:
        if self.not_checked:
            return NOT_CHECKED
        if self.broken_entries or self.worst & {"error", "warning"}:
            return FOUND
        return CLEAN


def cmd_check(args: argparse.Namespace) -> int:
    try:
        enabled = enabled_checks(args.enable, args.disable)
    except UserError as exc:
        return _not_checked(str(exc))
    report = Report()
    drafts = [d for d in (_draft(arg, report) for arg in args.drafts) if d is not None]
    if not drafts:
        return report.status()
    try:
        checker = _checker(args)
    except UserError as exc:
        return _not_checked(str(exc))
    except Exception as exc:  # the store's own errors: the line every command gives
        from citewise.indexer.store import StoreError

        if isinstance(exc, StoreError | OSError):
            return _not_checked(str(exc))
        raise
    bibs = [os.path.abspath(os.path.expanduser(b)) for b in args.bib]
    for path, lang in drafts:
        _check_one(checker, path, lang, bibs, enabled, args, report)
    if not args.json:
        print(_summary(report))
    return report.status()


def _not_checked(message: str) -> int:
    print(f"citewise: error: {message}", file=sys.stderr)
    return NOT_CHECKED


def enabled_checks(enable: list[str], disable: list[str]) -> dict[str, bool]:
    """The checks to run: the defaults, then ``--enable`` on, then ``--disable`` off (so disabling
    wins for a code given to both). An unknown code is a :class:`UserError`."""
    from citewise.models.checks.findings import default_enabled

    on = default_enabled()
    for codes, value in ((enable, True), (disable, False)):
        for raw in codes:
            for code in (c.strip() for c in raw.split(",") if c.strip()):
                if code not in on:
                    flag = "--enable" if value else "--disable"
                    raise UserError(f"{flag} {code!r}: no such check (known: {', '.join(on)})")
                on[code] = value
    return on


def _draft(arg: str, report: Report) -> tuple[Path, Lang] | None:
    """A draft's path and language, or None after one line saying why it is not checked."""
    from citewise.server import draft

    path = Path(arg).expanduser()
    lang = draft.language_for(str(path))
    why = ""
    if not path.exists():
        why = "no such file"
    elif not path.is_file():
        why = "not a file"
    elif lang is None:
        known = " ".join([*sorted(draft._LATEX_EXT), *sorted(draft._MARKDOWN_EXT)])  # what language_for reads
        why = f"not a draft citewise reads (LaTeX or Markdown: {known})"
    if why or lang is None:
        print(f"citewise: error: {arg}: {why}; not checked", file=sys.stderr)
        report.not_checked += 1
        return None
    return path, lang


def _checker(args: argparse.Namespace) -> ReferenceChecker:
    """The checker over the store of ``--store``, read only: a missing or stale search index is
    built in memory (with a note), never saved beside the store."""
    from citewise.indexer import bm25_files
    from citewise.models.recommender import Recommender
    from citewise.server.citation_checks import ReferenceChecker

    store = open_store(args)
    if store.count() == 0:
        raise empty_store_error(store)
    rec = Recommender(store, build_missing=False, use_dense=False, use_reranker=False)
    if rec.bm25 is None or rec.bm25.generation != store.generation:
        print(
            f"citewise: note: {bm25_files.index_folder(store)}: search index missing or out of date; "
            "building it in memory for this check (`citewise index` saves it)",
            file=sys.stderr,
        )
        rec.bm25 = bm25_files.load_or_build(store, save=False)
    return ReferenceChecker(rec)


def _check_one(
    checker: ReferenceChecker,
    path: Path,
    lang: Lang,
    bibs: list[str],
    enabled: dict[str, bool],
    args: argparse.Namespace,
    report: Report,
) -> None:
    from citewise.indexer.bibtex import looks_binary
    from citewise.server.citation_checks import first_per_key
    from citewise.server.documents import analyze

    try:
        data = path.read_bytes()
    except OSError as exc:
        print(f"citewise: error: {path}: cannot read ({exc.strerror or exc}); not checked", file=sys.stderr)
        report.not_checked += 1
        return
    if looks_binary(data):
        print(
            f"citewise: error: {path}: not text (binary data, not a LaTeX or Markdown draft); check that "
            "this is the right file; not checked",
            file=sys.stderr,
        )
        report.not_checked += 1
        return
    text = data.decode("utf-8", errors="replace")
    view = analyze(path.resolve(), text, lang, bibliography_setting=bibs)
    _report_bib_files(view, str(path), report)
    found = checker.check(view, enabled, args.context_chars)
    for cited in first_per_key(found):
        row = finding_row(view, str(path), cited)
        report.counts[row["code"]] += 1
        report.worst.add(row["severity"])
        print(json.dumps(row, ensure_ascii=False) if args.json else human_line(row), flush=False)
    _report_past_cap(str(path), found, args.json, report)
    report.checked += 1


def _report_past_cap(shown: str, found: list, as_json: bool, report: Report) -> None:
    """Say what the per-draft cap on findings left out, so "1000 findings" is not taken for all.

    --json gets one more object (``not_shown``, ``not_checked``, ``limit``) after the findings."""
    from citewise.server.citation_checks import MAX_FINDINGS

    more, unchecked = getattr(found, "not_shown", 0), getattr(found, "unchecked", 0)
    if not (more or unchecked):
        return
    report.not_shown += more
    if as_json:
        row = {"file": shown, "not_shown": more, "not_checked": unchecked, "limit": MAX_FINDINGS}
        print(json.dumps(row))
        return
    print(
        f"{shown}: ... and {more:,} more unknown-key findings not shown, {unchecked:,} citations not "
        f"checked (a draft's findings stop at {MAX_FINDINGS:,}); add the missing entries to the "
        ".bib or pass it with --bib, then check again"
    )


def finding_row(view: DraftView, shown: str, cited: CitedFinding) -> dict:
    """One finding as a JSON-ready dict; ``line``/``column`` are 1-based, the column counting
    characters (code points, not the editor protocol's UTF-16 units) to the cited key."""
    f = cited.finding
    line, _utf16 = view.lines.position(cited.key.start)
    row = {
        "file": shown,
        "line": line + 1,
        "column": cited.key.start - view.lines.line_start(line) + 1,
        "key": cited.key.key,
        "code": f.code,
        "severity": f.severity,
        "message": f.message,
        "suggested": f.suggested or "",
        "suggested_key": cited.suggested_key or "",
    }
    if f.update is not None:
        row["update"] = dict(f.update.fields)
    if cited.span is not None:
        row["bib_file"] = _shown_path(cited.span.path)
        row["bib_line"] = cited.span.line + 1
    return row


def human_line(row: dict) -> str:
    """``path:line:col: severity: [code] key: message (suggested: KEY)``, with characters a
    terminal would not show written out (:func:`visible`)."""
    out = f"{row['file']}:{row['line']}:{row['column']}: {row['severity']}: [{row['code']}] {row['key']}: {row['message']}"
    suggested = row["suggested_key"] or row["suggested"]
    if suggested and suggested != row["key"]:
        out += f" (suggested: {suggested})"
    return visible(out)


def visible(text: str) -> str:
    """``text`` with every character a terminal does not print as itself (zero-width and
    other format characters, bidi controls that reorder the line, control characters, separators
    other than the space) written as ``<U+200B>``: a key with a zero-width space would otherwise
    look exactly like the valid key it differs from, and U+202E would print the line reversed.
    (``--json`` keeps the exact characters, for programs.)"""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else f"<U+{ord(ch):04X}>" for ch in text)


def _report_bib_files(view: DraftView, shown: str, report: Report) -> None:
    """One line per declared ``.bib`` that is missing and per broken entry (a few per file), once
    per file however many drafts share it; the other entries are still checked."""
    from citewise.indexer.bibtex import iter_bibtex_text
    from citewise.indexer.records import ImportProblem

    for bf in view.bib_files:
        path = str(bf.path)
        text = view.bib_texts.get(path)
        if path in report.bibs_read:
            continue
        report.bibs_read.add(path)
        name = _shown_path(path)
        if text is None:
            why = (
                f"names no bibliography and there is no {name} (pass --bib FILE)"
                if bf.origin == "default"
                else f"bibliography {name} not found"
            )
            print(f"citewise: warning: {shown}: {why}; its cited keys are all unknown", file=sys.stderr)
            continue
        problems = [p for p in iter_bibtex_text(text, name) if isinstance(p, ImportProblem) and not p.skipped]
        for p in problems[:MAX_BIB_PROBLEMS]:
            print(visible(f"{p.source}:{p.line}: error: {p.message}"), file=sys.stderr)
        if len(problems) > MAX_BIB_PROBLEMS:
            print(f"{name}: error: {len(problems) - MAX_BIB_PROBLEMS} more broken entries", file=sys.stderr)
        report.broken_entries += len(problems)


def _shown_path(path: str) -> str:
    """A path as a report shows it: relative to the working folder when inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


def _summary(report: Report) -> str:
    from citewise.models.checks.findings import CHECKS

    drafts = f"{report.checked} draft{'s' if report.checked != 1 else ''} checked"
    total = sum(report.counts.values())
    if not total:
        out = f"{drafts}: no findings"
    else:
        per = ", ".join(f"{report.counts[c]} {c}" for c in CHECKS if report.counts[c])
        out = f"{drafts}: {total} finding{'s' if total != 1 else ''} ({per})"
    if report.not_shown:
        out += f" ... and {report.not_shown:,} more not shown"
    if report.broken_entries:
        out += f"; {report.broken_entries} broken .bib entr{'ies' if report.broken_entries != 1 else 'y'}"
    if report.not_checked:
        out += f"; {report.not_checked} not checked"
    return out
