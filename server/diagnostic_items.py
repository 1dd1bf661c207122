"""The diagnostics citewise publishes, as plain data (no LSP types; :mod:`.convert` turns them into
LSP diagnostics): a placeholder waiting for a key, and what the reference checks found about a
cited key (:mod:`.citation_checks`: a key no ``.bib`` defines, a suspect entry, ...)."""

from __future__ import annotations

from dataclasses import dataclass

from citewise.models.checks.findings import SEVERITIES
from citewise.models.recommender import Recommendation

from .citation_checks import CitedFinding
from .draft import LineIndex, Placeholder


@dataclass(frozen=True)
class Diag:
    """A diagnostic in LSP coordinates; ``severity``: 1 error, 2 warning, 3 information, 4 hint."""

    start: tuple[int, int]
    end: tuple[int, int]
    severity: int
    message: str
    code: str
    data: dict


def placeholder_diagnostic(
    ph: Placeholder, lines: LineIndex, items: list[Recommendation] | None, store_note: str | None = None
) -> Diag:
    """Information on a placeholder: how many suggestions, and the best one; ``store_note`` says
    why there are few or none (an empty store, and the command that fills it)."""
    cit = ph.citation
    if items:
        top = items[0].paper
        msg = f"{len(items)} suggestions; top: {top.title} ({top.year or 'n.d.'})"
    elif items is None:
        msg = "citation placeholder: suggestions are being ranked"
    else:
        msg = "citation placeholder: no suggestions"
    if store_note and items is not None:
        msg += f" ({store_note})"
    return Diag(
        lines.position(cit.start), lines.position(cit.end), 3, msg, "placeholder", {"slot": ph.key_index}
    )


def finding_diagnostic(found: CitedFinding, lines: LineIndex) -> Diag:
    """A check's finding at the cited key's range, its code the check's (``unknown-key``,
    ``suspect-reference``, ...). ``data`` carries what a code action is matched and built by: the
    key, the code, the suggested key, and which fix the finding asks for."""
    f, k = found.finding, found.key
    data: dict = {"key": k.key, "code": f.code, "suggested": found.suggested_key}
    if f.paper is not None:
        data["paper"] = f.paper.id
    if f.replace:
        data["fix"] = "replace"
    elif f.update is not None:
        data["fix"] = "update"
        data["fields"] = [name for name, _v in f.update.fields]
    if found.span is not None:
        data["bib"] = found.span.path
    severity = SEVERITIES.index(f.severity) + 1
    return Diag(lines.position(k.start), lines.position(k.end), severity, f.message, f.code, data)
