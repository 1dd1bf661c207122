"""Workspace edits and code actions as plain dataclasses (lsp.py turns them into lsprotocol types).

One accepted suggestion is ONE workspace edit: the key goes into the draft and the entry into
the ``.bib`` (created when missing) together, so undo and "the draft cites something the
bibliography lacks" can never get out of step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from citewise.indexer.store import StoredPaper
from citewise.models.recommender import Recommendation

from .bibindex import BibIndex, append_text, key_for_paper
from .completion_items import Edit
from .draft import LineIndex, Placeholder

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
    diagnostic_key: str = ""  # key of the "missing from the bibliography" diagnostic it fixes


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
    key_style: str,
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
    key_style: str,
    n: int = 5,
) -> list[Action]:
    """The top ``n`` papers as "Cite: Title (Year)" actions, each one complete workspace edit."""
    out = []
    for i, rec in enumerate(items[:n]):
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
    return Action(f"Add missing BibTeX entry for {key}: {_title_year(paper, 50)}", CITE_KIND, plan, True, key)
