"""Hover text, definition targets and diagnostics as plain data (no LSP types)."""

from __future__ import annotations

from dataclasses import dataclass

from citewise.indexer.store import StoredPaper
from citewise.models.recommender import Recommendation

from .completion import short_authors
from .draft import Citation, LineIndex, Placeholder


def hover_markdown(paper: StoredPaper, key: str, in_bib: bool) -> str:
    """Title, authors, year, venue, abstract and a DOI link for a cited key."""
    lines = [f"**{paper.title}**", ""]
    authors = "; ".join(paper.authors) if len(paper.authors) <= 6 else short_authors(paper.authors)
    meta = [authors or "unknown authors", str(paper.year) if paper.year else "n.d."]
    if paper.venue:
        meta.append(f"*{paper.venue}*")
    lines.append(" · ".join(meta))
    links = []
    if paper.doi:
        links.append(f"[doi:{paper.doi}](https://doi.org/{paper.doi})")
    if paper.arxiv:
        links.append(f"[arXiv:{paper.arxiv}](https://arxiv.org/abs/{paper.arxiv})")
    if links:
        lines += ["", " · ".join(links)]
    if paper.abstract:
        lines += ["", paper.abstract]
    lines += ["", f"`{key}`" + ("" if in_bib else " — not in the draft's bibliography")]
    return "\n".join(lines)


def bib_only_markdown(key: str, path: str, line: int) -> str:
    """Hover for a key the bibliography has but the store does not know."""
    return f"`{key}` — defined in {path}:{line + 1} (not in the citewise store)"


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
