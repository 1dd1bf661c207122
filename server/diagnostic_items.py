"""The diagnostics citewise publishes, as plain data (no LSP types; :mod:`.convert` turns them into
LSP diagnostics): a placeholder waiting for a key, and a cited key that no ``.bib`` defines."""

from __future__ import annotations

from dataclasses import dataclass

from citewise.models.recommender import Recommendation

from .draft import Citation, LineIndex, Placeholder


@dataclass(frozen=True)
class Diag:
    """A diagnostic in LSP coordinates; ``severity``: 1 error, 2 warning, 3 information."""

    start: tuple[int, int]
    end: tuple[int, int]
    severity: int
    message: str
    code: str
    data: dict


def placeholder_diagnostic(ph: Placeholder, lines: LineIndex, items: list[Recommendation] | None) -> Diag:
    """Information on a placeholder: how many suggestions, and the best one."""
    cit = ph.citation
    if items:
        top = items[0].paper
        msg = f"{len(items)} suggestions; top: {top.title} ({top.year or 'n.d.'})"
    elif items is None:
        msg = "citation placeholder: suggestions are being ranked"
    else:
        msg = "citation placeholder: no suggestions (is the paper store empty?)"
    return Diag(
        lines.position(cit.start), lines.position(cit.end), 3, msg, "placeholder", {"slot": ph.key_index}
    )


def missing_key_diagnostic(cit: Citation, key_index: int, lines: LineIndex, known_title: str | None) -> Diag:
    """Warning on a key the draft's bibliography lacks (with the store's title when known)."""
    k = cit.keys[key_index]
    msg = f"'{k.key}' is not in the bibliography"
    if known_title:
        msg += f" (the store knows it: {known_title}; use the code action to add the entry)"
    return Diag(lines.position(k.start), lines.position(k.end), 2, msg, "missing-key", {"key": k.key})
