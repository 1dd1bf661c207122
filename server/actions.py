"""Workspace edits and code actions as plain dataclasses (lsp.py turns them into lsprotocol types).

One accepted suggestion is ONE workspace edit: the key goes into the draft and the entry into
the ``.bib`` (created when missing) together, so undo and "the draft cites something the
bibliography lacks" can never get out of step.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

from citewise.indexer.store import StoredPaper
from citewise.models.bib_lift import lift
from citewise.models.checks.findings import MISMATCH, SUSPECT, UNKNOWN_KEY, UNLIKELY, FieldFix
from citewise.models.recommender import Recommendation
from citewise.settings import EntryStyle

from . import bib_edits
from .bibindex import BibIndex, append_text, key_for_paper
from .citation_checks import CitedFinding
from .completion.items import Edit
from .completion.slot import waiting_in_bib
from .draft import Citation, LineIndex, Placeholder

CITE_KIND = "quickfix"


@dataclass
class FileChange:
    """Edits to one file; ``create`` asks the client to create it first (it does not exist)."""

    path: str
    edits: list[Edit]
    create: bool = False


@dataclass(frozen=True)
class NewEntry:
    """A BibTeX entry a plan appends: the server tracks it until the ``.bib`` shows it."""

    bib_path: str
    key: str
    entry: str


@dataclass
class EditPlan:
    changes: list[FileChange] = field(default_factory=list)
    entries: list[NewEntry] = field(default_factory=list)

    def add(self, change: FileChange) -> None:
        self.changes.append(change)


@dataclass
class Action:
    title: str
    kind: str
    plan: EditPlan
    preferred: bool = False
    diagnostic_key: str = ""  # key of the diagnostic it fixes ("missing from the bibliography", a check's)
    diagnostic_code: str = ""  # and that diagnostic's code ("": any diagnostic of the key)


def bib_append(bib_path: str, bib_text: str | None, entry: str) -> FileChange:
    """The change that appends ``entry`` to a ``.bib`` whose current text is ``bib_text`` (None: absent)."""
    if bib_text is None:
        return FileChange(bib_path, [Edit((0, 0), (0, 0), entry)], create=True)
    end = LineIndex(bib_text).position(len(bib_text))
    return FileChange(bib_path, [Edit(end, end, append_text(bib_text, entry))])


def cite_plan(
    paper: StoredPaper,
    draft_path: str,
    draft_lines: LineIndex,
    slot: tuple[int, int, str, str] | None,
    bib: BibIndex,
    bib_path: str,
    bib_text: str | None,
    key_style: str | EntryStyle,
) -> tuple[str, EditPlan]:
    """``(key, plan)`` citing ``paper``: fill ``slot`` (start, end, before, after) in the draft when
    given, and append the entry to the ``.bib`` unless the paper is already there (any key)."""
    pk = key_for_paper(paper, bib, key_style)
    plan = EditPlan()
    if slot is not None:
        start, end, before, after = slot
        plan.add(
            FileChange(
                draft_path,
                [Edit(draft_lines.position(start), draft_lines.position(end), before + pk.key + after)],
            )
        )
    if not pk.in_bib:
        plan.add(bib_append(bib_path, bib_text, pk.entry))
        plan.entries.append(NewEntry(bib_path, pk.key, pk.entry))
    return pk.key, plan


def _title_year(paper: StoredPaper, n: int = 70) -> str:
    title = paper.title if len(paper.title) <= n else paper.title[: n - 1].rsplit(" ", 1)[0] + "…"
    return f"{title} ({paper.year or 'n.d.'})"


def placeholder_actions(
    ph: Placeholder,
    items: list[Recommendation],
    draft_path: str,
    draft_lines: LineIndex,
    bib: BibIndex,
    bib_path: str,
    bib_text: str | None,
    key_style: str | EntryStyle,
    n: int = 5,
    cited: Collection[str] = frozenset(),
) -> list[Action]:
    """The top ``n`` papers as "Cite: Title (Year)" actions, each one complete workspace edit.

    ``items`` are ordered as the completion menu orders the same list (:func:`lift`, with the
    ``.bib`` entries the draft does not cite elsewhere, ``cited``, as the ones it may raise), so
    the actions and the menu agree on the first paper."""
    out = []
    waiting = waiting_in_bib(bib, cited)
    ordered = lift(items, lambda rec: waiting(rec.paper))
    for i, rec in enumerate(ordered[:n]):
        key, plan = cite_plan(
            rec.paper,
            draft_path,
            draft_lines,
            (ph.start, ph.end, ph.before, ph.after),
            bib,
            bib_path,
            bib_text,
            key_style,
        )
        out.append(Action(f"Cite: {_title_year(rec.paper)}", CITE_KIND, plan, preferred=i == 0))
    return out


def missing_entry_action(
    key: str, paper: StoredPaper, bib: BibIndex, bib_path: str, bib_text: str | None
) -> Action | None:
    """ "Add missing BibTeX entry" for a cited key the bibliography lacks but the store knows.

    The entry keeps the key the draft already uses (the draft is right about its own keys).
    """
    from citewise.indexer.bibtex_writer import bibtex_entry, format_entry

    if key in bib:
        return None
    k, entry = bibtex_entry(paper, bib.keys)
    if k != key:
        head = re.match(r"\s*@\s*[A-Za-z]+\s*[{(]\s*" + re.escape(k) + r"\s*,", entry)
        entry = (
            entry[: head.start()] + head.group(0).replace(k, key) + entry[head.end() :]
            if head
            else format_entry(paper, key)
        )
    plan = EditPlan([bib_append(bib_path, bib_text, entry)], [NewEntry(bib_path, key, entry)])
    title = f"Add missing BibTeX entry for {key}: {_title_year(paper, 50)}"
    return Action(title, CITE_KIND, plan, True, key, UNKNOWN_KEY)


# -- the reference checks' fixes (issue 27) ---------------------------------------------------------
def _bib_change(bib_path: str, bib_text: str, edits: list[bib_edits.TextEdit]) -> FileChange:
    """Offsets into the .bib text as LSP positions of that same text (an unsaved buffer's, when open)."""
    lines = LineIndex(bib_text)
    return FileChange(bib_path, [Edit(lines.position(s), lines.position(e), t) for s, e, t in edits])


def replace_entry_action(
    key: str,
    code: str,
    paper: StoredPaper,
    bib_path: str,
    bib_text: str,
    span: tuple[int, int],
    fields: str = "standard",
) -> Action:
    """ "Replace entry 'KEY' with the stored paper": the whole entry ``bib_text[span]`` becomes the
    stored paper's, under the same key (the draft's citations of it stay valid)."""
    from citewise.indexer.bibtex_writer import format_entry

    edit = bib_edits.replace_entry(bib_text, span[0], span[1], format_entry(paper, key, fields=fields))
    plan = EditPlan([_bib_change(bib_path, bib_text, [edit])])
    title = f"Replace entry '{key}' with the stored paper: {_title_year(paper)}"
    return Action(title, CITE_KIND, plan, True, key, code)


def update_entry_action(
    key: str, code: str, fix: FieldFix, bib_path: str, bib_text: str, span: tuple[int, int]
) -> Action | None:
    """ "Update 'KEY' from the store: title, year": those fields' values set from the store, every
    other byte of the entry kept (None: the entry cannot be read, or it already says so)."""
    edits = bib_edits.update_fields(bib_text, span[0], span[1], fix.fields)
    if not edits:
        return None
    plan = EditPlan([_bib_change(bib_path, bib_text, edits)])
    names = ", ".join(name for name, _v in fix.fields)
    return Action(f"Update '{key}' from the store: {names}", CITE_KIND, plan, True, key, code)


def _quoted_title(paper: StoredPaper, n: int = 60) -> str:
    title = paper.title if len(paper.title) <= n else paper.title[: n - 1].rsplit(" ", 1)[0] + "…"
    return f"\u201c{title}\u201d"


def _also_separator(cit: Citation) -> str | None:
    """What goes between a key and one more key in the same citation (None: no list to add to)."""
    if cit.lang == "latex" and cit.command.startswith("\\") and cit.command != "\\cite<>" and cit.groups:
        return ", "
    if cit.lang == "markdown" and cit.command == "[@]":
        return "; @"
    return None


def unlikely_actions(
    cit: Citation,
    key_index: int,
    paper: StoredPaper,
    draft_path: str,
    draft_lines: LineIndex,
    bib: BibIndex,
    bib_path: str,
    bib_text: str | None,
    key_style: str | EntryStyle,
) -> list[Action]:
    """For an unlikely citation: cite the suggested paper instead of the key (the key's span is the
    slot), and, where the citation is a list, cite it as well; each appends the paper's entry to the
    .bib when the bibliography lacks it (:func:`cite_plan`)."""
    k = cit.keys[key_index]
    _key, instead = cite_plan(
        paper, draft_path, draft_lines, (k.start, k.end, "", ""), bib, bib_path, bib_text, key_style
    )
    out = [
        Action(
            f"Cite {_quoted_title(paper)} instead of '{k.key}'", CITE_KIND, instead, False, k.key, UNLIKELY
        )
    ]
    sep = _also_separator(cit)
    if sep is not None:
        _key, also = cite_plan(
            paper, draft_path, draft_lines, (k.end, k.end, sep, ""), bib, bib_path, bib_text, key_style
        )
        out.append(Action(f"Also cite {_quoted_title(paper)}", CITE_KIND, also, False, k.key, UNLIKELY))
    return out


def finding_actions(
    found: list[CitedFinding],
    draft_path: str,
    draft_lines: LineIndex,
    bib: BibIndex,
    bib_texts: dict[str, str | None],
    target_bib: str,
    entry_style: EntryStyle,
) -> list[Action]:
    """The fixes of the checks' ``found`` (those a code action request's range covers): replace a
    suspect entry, update a mismatched one, cite the suggested paper for an unlikely one. Edits
    to a .bib are offsets into ``bib_texts`` (the texts the findings were computed on). Each
    title once: a key cited twice in the range gets its entry's fix once."""
    out: dict[str, Action] = {}
    for f in found:
        k, finding, span = f.key, f.finding, f.span
        bib_text = bib_texts.get(span.path) if span is not None else None
        got: list[Action | None] = []
        if span is not None and bib_text is not None:
            where = (span.start, span.end)
            if finding.code == SUSPECT and finding.replace and finding.paper is not None:
                got.append(
                    replace_entry_action(
                        k.key, SUSPECT, finding.paper, span.path, bib_text, where, entry_style.fields
                    )
                )
            elif finding.code == MISMATCH and finding.update is not None:
                got.append(update_entry_action(k.key, MISMATCH, finding.update, span.path, bib_text, where))
        if finding.code == UNLIKELY and finding.paper is not None:
            got += unlikely_actions(
                f.citation,
                f.key_index,
                finding.paper,
                draft_path,
                draft_lines,
                bib,
                target_bib,
                bib_texts.get(target_bib),
                entry_style,
            )
        for a in got:
            if a is not None:
                out.setdefault(a.title, a)
    return list(out.values())
