"""What the recommender is asked: the local context of a placeholder plus the draft's global context.

The language server, the CLI and the evaluation all build this one type, so a ranking measured
by ``citewise eval`` is exactly the ranking an editor gets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLACEHOLDER_MARK = "\ue000"  # private-use characters: never prose, removed by marked_query
OTHER_MARK = "\ue001"
MARKS = PLACEHOLDER_MARK + OTHER_MARK
# The draft reader's whitespace rules (server/scan_model.normalize_space), so a context reads the
# same whether it came marked or plain.
_SPACE_BEFORE_PUNCT = re.compile(r" ([,.;:!?)\]])")
_SPACE_AFTER_OPEN = re.compile(r"([(\[]) ")


@dataclass(frozen=True)
class ContextQuery:
    """A citation need: the text around the placeholder and the citing draft's title and abstract."""

    local: str
    citing_title: str = ""
    citing_abstract: str = ""
    # Where the placeholder stands in ``local`` (a character offset; -1: not known, e.g. a
    # sentence-level or free-text query), and where other citation markers stood before they were
    # removed: what lets each placeholder of a sentence weigh its own words (models/focus.py).
    at: int = -1
    others: tuple[int, ...] = ()

    def text(self, with_title: bool = True, with_abstract: bool = True) -> str:
        parts = [self.local]
        if with_title and self.citing_title:
            parts.append(self.citing_title)
        if with_abstract and self.citing_abstract:
            parts.append(self.citing_abstract)
        return " ".join(p for p in parts if p)


@dataclass
class Candidate:
    """One recommended paper with the score of every source that found it (for explanations)."""

    paper_id: int
    score: float
    sources: dict[str, float] = field(default_factory=dict)  # e.g. {"bm25": 12.3, "dense": 0.71}
    ranks: dict[str, int] = field(default_factory=dict)  # 1-based rank within each source


def marked_query(marked: str, citing_title: str = "", citing_abstract: str = "") -> ContextQuery:
    """The query of a local context written with ``PLACEHOLDER_MARK``/``OTHER_MARK`` where the
    citation markers were: the marks are removed, whitespace normalised (``"systems , and"`` ->
    ``"systems, and"``), and their offsets kept as ``at``/``others`` (the first placeholder mark
    is the placeholder; later ones count as other markers)."""
    s = " ".join(marked.split())
    s = _SPACE_AFTER_OPEN.sub(r"\1", _SPACE_BEFORE_PUNCT.sub(r"\1", s))
    out: list[str] = []
    at = -1
    others: list[int] = []
    skip_space = False
    for ch in s:
        if ch in MARKS:
            if out and out[-1] == " ":
                out.pop()
            pos = len(out)
            if ch == PLACEHOLDER_MARK and at < 0:
                at = pos
            else:
                others.append(pos)
            skip_space = not out
            continue
        if skip_space and ch == " ":
            continue
        skip_space = False
        out.append(ch)
    local = "".join(out).rstrip()
    n = len(local)
    return ContextQuery(
        local, citing_title, citing_abstract, min(at, n), tuple(sorted({min(o, n) for o in others}))
    )
