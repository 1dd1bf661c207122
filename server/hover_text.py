"""Hover text of a cited key, as Markdown (no LSP types): the paper from the store, or where a
key that only the draft's ``.bib`` knows is defined."""

from __future__ import annotations

from citewise.indexer.store import StoredPaper

from .completion.labels import short_authors


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
