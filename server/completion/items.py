"""Completion items for a citation key slot, as plain dataclasses (lsp.py converts them).

Decisions, each for a client behaviour:

* ``label`` is the key that will be inserted, so what the user sees is what the draft gets.
* ``detail`` and ``label_description`` are the menu line, title first, and ``label_detail`` names
  the version where two items share a key: :mod:`.labels` says which editor shows which.
* ``sort_text`` is the zero-padded rank: clients sort by it, so the order :func:`.slot.order` gave
  stands (the recommender's, with the draft's ``.bib`` papers lifted by
  :func:`citewise.models.bib_lift.lift`, the rule the code actions order by too;
  ``docs/own-bibliography-ranking.md``).
* ``filter_text`` holds the key, the title words and the first author. The server has already
  filtered by what was typed (:func:`.slot.filter_by_prefix` uses word
  prefixes of the same fields), and a word prefix is a strong match in every client's fuzzy
  filter (VS Code's is the strictest), so no context-ranked paper the server sends is hidden.
  For a placeholder token (``TODO``, ``?``, ``\\cite<``) the typed text is not the start of a
  key: :meth:`CursorCitation.filter_text` puts it in front.
* The edit replaces only the key slot under the cursor (``\\cite{a, b,|}`` keeps ``a, b``).
* A paper not yet in the ``.bib`` carries a command that asks the server to append its entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from citewise.indexer.store import StoredPaper
from citewise.models.recommender import Recommendation

from ..bibindex import PaperKey
from ..command_ids import INSERT_COMMAND  # re-exported: completion items carry it
from ..draft import CursorCitation, LineIndex
from .labels import menu_line, short_authors, version_tags


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
    label_description: str = ""  # labelDetails.description: the menu line (labels.py)
    label_detail: str = ""  # labelDetails.detail: the version, only where another item has the key
    documentation: str | None = None  # markdown; None = filled by completionItem/resolve
    command: tuple[str, str, list] | None = None  # (title, command, arguments)
    data: dict = field(default_factory=dict)
    preselect: bool = False


@dataclass
class CompletionResult:
    items: list[CompletionEntry]
    is_incomplete: bool


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
    """Title and every author's last name: what :func:`.slot.matches_prefix` matches a typed
    prefix against, so a client filtering on ``filterText`` keeps what the server kept."""
    p = rec.paper
    last_names = [a.split(",")[0].strip() for a in p.authors]
    return " ".join(x for x in (p.title, *last_names) if x)


def build_completion(
    keyed: list[tuple[Recommendation, PaperKey]],
    cursor: CursorCitation,
    lines: LineIndex,
    *,
    doc_uri: str,
    bib_path: str,
    complete: bool,
    with_documentation: bool,
) -> CompletionResult:
    """Completion entries for the cursor's key slot, in the order of ``keyed`` (each paper with its
    key, as :func:`.slot.order` decided them).

    ``with_documentation`` False leaves documentation to ``completionItem/resolve`` (clients
    that support lazily resolved documentation); the item's ``data`` says how to resolve it.
    Keys already cited elsewhere in the same citation are skipped: citing twice is a mistake.
    """
    other_keys = {k.key for i, k in enumerate(cursor.citation.keys) if i != cursor.key_index}
    span = Edit(lines.position(cursor.start), lines.position(cursor.end), "")
    width = max(3, len(str(len(keyed))))
    out = [
        _entry(rec, pk, f"{rank:0{width}d}", cursor, span, doc_uri, bib_path, with_documentation)
        for rank, (rec, pk) in enumerate(keyed, 1)
        if pk.key not in other_keys
    ]
    tag_versions(out, {(rec.paper.id, pk.key): rec.paper for rec, pk in keyed})
    return CompletionResult(out, is_incomplete=not complete)


def _entry(
    rec: Recommendation,
    pk: PaperKey,
    sort_text: str,
    cursor: CursorCitation,
    span: Edit,
    doc_uri: str,
    bib_path: str,
    with_documentation: bool,
) -> CompletionEntry:
    """One paper's completion entry: its key replaces the slot (``span``), its title is the menu
    line, and a paper the ``.bib`` lacks carries the command that appends its entry."""
    entry = CompletionEntry(
        label=pk.key,
        detail=menu_line(rec.paper, pk.in_bib),
        sort_text=sort_text,
        filter_text=cursor.filter_text(pk.key) + " " + filter_words(rec),
        edit=Edit(span.start, span.end, cursor.replacement(pk.key)),
        paper_id=rec.paper.id,
        in_bib=pk.in_bib,
        label_description=menu_line(rec.paper, pk.in_bib),
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
        preselect=sort_text.lstrip("0") == "1",
    )
    if not pk.in_bib:
        entry.command = (
            "Add the BibTeX entry",
            INSERT_COMMAND,
            [{"uri": doc_uri, "paperId": rec.paper.id, "key": pk.key, "bib": bib_path}],
        )
    return entry


def tag_versions(entries: list[CompletionEntry], papers: dict[tuple[int, str], StoredPaper]) -> None:
    """Set ``label_detail`` on entries that share their key (two versions of a paper), and keep it
    in ``data`` so ``completionItem/resolve`` can give it back. ``papers``: each entry's paper by
    ``(paper_id, key)`` (a .bib entry not in the store has id 0, but its own key)."""
    keyed = [(e.label, papers[(e.paper_id, e.label)]) for e in entries]
    for e, tag in zip(entries, version_tags(keyed), strict=True):
        if tag:
            e.label_detail = tag
            e.data["labelDetail"] = tag
