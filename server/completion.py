"""Completion items for a citation key slot, as plain dataclasses (lsp.py converts them).

Decisions, each for a client behaviour:

* ``label`` is the key that will be inserted, so what the user sees is what the draft gets.
* ``sort_text`` is the zero-padded rank: clients sort by it, so the recommender's order stands.
* ``filter_text`` holds the key, the title words and the first author. The server has already
  filtered by what was typed (:func:`citewise.server.ranking.filter_by_prefix` uses word
  prefixes of the same fields), and a word prefix is a strong match in every client's fuzzy
  filter (VS Code's is the strictest), so no context-ranked paper the server sends is hidden.
  For a placeholder token (``TODO``, ``?``, ``\\cite<``) the typed text is not the start of a
  key: :meth:`CursorCitation.filter_text` puts it in front.
* The edit replaces only the key slot under the cursor (``\\cite{a, b,|}`` keeps ``a, b``).
* A paper not yet in the ``.bib`` carries a command that asks the server to append its entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from citewise.indexer.store import StoredPaper
from citewise.models.recommender import Recommendation

from .bibindex import BibIndex, key_for_paper
from .command_ids import INSERT_COMMAND  # re-exported: completion items carry it
from .draft import CursorCitation, LineIndex

T = TypeVar("T")


@dataclass(frozen=True)
class Edit:
    """A text replacement in LSP coordinates: ((line, char), (line, char)) -> new_text."""

    start: tuple[int, int]
    end: tuple[int, int]
    new_text: str


@dataclass
class CompletionEntry:
    label: str
    detail: str
    sort_text: str
    filter_text: str
    edit: Edit
    paper_id: int
    in_bib: bool
    label_description: str = ""
    documentation: str | None = None  # markdown; None = filled by completionItem/resolve
    command: tuple[str, str, list] | None = None  # (title, command, arguments)
    data: dict = field(default_factory=dict)
    preselect: bool = False


@dataclass
class CompletionResult:
    items: list[CompletionEntry]
    is_incomplete: bool


def short_authors(authors: list[str], n: int = 3) -> str:
    """``Smith, Jones and Lee`` / ``Smith et al.``: last names, enough to recognise a paper."""
    last = [a.split(",")[0].strip() if "," in a else a.split()[-1] if a.split() else a for a in authors]
    last = [x for x in last if x]
    if not last:
        return "unknown authors"
    if len(last) > n:
        return f"{last[0]} et al."
    if len(last) == 1:
        return last[0]
    return ", ".join(last[:-1]) + " and " + last[-1]


def detail_line(rec: Recommendation | StoredPaper) -> str:
    p = rec.paper if isinstance(rec, Recommendation) else rec
    parts = [short_authors(p.authors), str(p.year) if p.year else "n.d."]
    if p.venue:
        parts.append(p.venue)
    return ", ".join(parts)


def documentation(paper: StoredPaper, why: str, in_bib: bool, key: str, abstract_chars: int = 1200) -> str:
    """Markdown shown beside the item: title, authors, abstract and why it was suggested."""
    p = paper
    lines = [f"**{p.title}**", "", detail_line(p)]
    if p.doi:
        lines.append(f"[doi:{p.doi}](https://doi.org/{p.doi})")
    lines.append("")
    if p.abstract:
        abstract = (
            p.abstract
            if len(p.abstract) <= abstract_chars
            else p.abstract[:abstract_chars].rsplit(" ", 1)[0] + " …"
        )
        lines += [abstract, ""]
    lines.append(f"*Why:* {why}" if why else "*Why:* matches the text around the citation")
    lines.append(
        f"*In your .bib* as `{key}`" if in_bib else f"*Not in your .bib yet:* choosing it adds `{key}`"
    )
    return "\n".join(lines)


def filter_words(rec: Recommendation) -> str:
    """Title and every author's last name: what :func:`.ranking.matches_prefix` matches a typed
    prefix against, so a client filtering on ``filterText`` keeps what the server kept."""
    p = rec.paper
    last_names = [a.split(",")[0].strip() for a in p.authors]
    return " ".join(x for x in (p.title, *last_names) if x)


def build_completion(
    items: list[Recommendation],
    cursor: CursorCitation,
    lines: LineIndex,
    bib: BibIndex,
    *,
    key_style: str,
    doc_uri: str,
    bib_path: str,
    complete: bool,
    with_documentation: bool,
) -> CompletionResult:
    """Completion entries for the cursor's key slot, in ranking order.

    ``with_documentation`` False leaves documentation to ``completionItem/resolve`` (clients
    that support lazily resolved documentation); the item's ``data`` says how to resolve it.
    Keys already cited elsewhere in the same citation are skipped: citing twice is a mistake.
    """
    other_keys = {k.key for i, k in enumerate(cursor.citation.keys) if i != cursor.key_index}
    start = lines.position(cursor.start)
    end = lines.position(cursor.end)
    out: list[CompletionEntry] = []
    width = max(3, len(str(len(items))))
    keyed = [(rec, key_for_paper(rec.paper, bib, key_style)) for rec in items]
    keyed = library_first(keyed, lambda pair: pair[1].in_bib)
    for rank, (rec, pk) in enumerate(keyed, 1):
        if pk.key in other_keys:
            continue
        edit = Edit(start, end, cursor.replacement(pk.key))
        filter_text = cursor.filter_text(pk.key) + " " + filter_words(rec)
        entry = CompletionEntry(
            label=pk.key,
            detail=detail_line(rec),
            sort_text=f"{rank:0{width}d}",
            filter_text=filter_text,
            edit=edit,
            paper_id=rec.paper.id,
            in_bib=pk.in_bib,
            label_description=label_description(rec.paper.title, pk.in_bib),
            documentation=documentation(rec.paper, rec.reason(), pk.in_bib, pk.key)
            if with_documentation
            else None,
            data={
                "paperId": rec.paper.id,
                "key": pk.key,
                "inBib": pk.in_bib,
                "why": rec.reason(),
                "uri": doc_uri,
            },
            preselect=rank == 1,
        )
        if not pk.in_bib:
            entry.command = (
                "Add the BibTeX entry",
                INSERT_COMMAND,
                [{"uri": doc_uri, "paperId": rec.paper.id, "key": pk.key, "bib": bib_path}],
            )
        out.append(entry)
    return CompletionResult(out, is_incomplete=not complete)


def label_description(title: str, in_bib: bool) -> str:
    """What an editor shows beside the key: the paper's (short) title, marked when the draft's
    .bib already has it; so a user sees papers, not opaque keys."""
    return ("✓ in .bib · " if in_bib else "") + _short_title(title)


LIBRARY_WINDOW = 30


def library_first(ranked: list[T], in_library: Callable[[T], bool], window: int = LIBRARY_WINDOW) -> list[T]:
    """Papers of the user's own bibliography that rank within the top ``window`` come first.

    The author's library is what they most likely mean to cite; a paper they already hold and
    that fits the sentence should not sit below strangers. Beyond the window, context wins:
    a library paper that does not fit the sentence keeps its place.
    """
    head = ranked[:window]
    mine = [x for x in head if in_library(x)]
    if not mine:
        return ranked
    return mine + [x for x in head if not in_library(x)] + ranked[window:]


def _short_title(title: str, n: int = 60) -> str:
    return title if len(title) <= n else title[: n - 1].rsplit(" ", 1)[0] + "…"
