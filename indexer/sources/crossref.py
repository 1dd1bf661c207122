"""Crossref works, as the REST API and the public data file publish them: a list page
(``{"message-type": "work-list", "message": {"items": [...]}}``), a single work
(``{"message-type": "work", "message": {...}}``), the annual public data file's
``{"items": [...]}``, or JSON Lines of work objects (one ``message`` a line).

What a work gives: the title (``title[0]``, plus ``subtitle[0]``), authors (``family, given`` or an
organisation's ``name``), the year (``issued``, else ``published``...), the venue
(``container-title``), the type, the DOI, the abstract (JATS XML, made plain text: Crossref
abstracts are ``<jats:title>Abstract</jats:title><jats:p>...</jats:p>``), and ``reference[]``:

- a reference with a ``DOI`` is a citation edge by DOI (an arXiv DataCite DOI by arXiv id);
- one whose ``unstructured`` text names a DOI or an arXiv id is an edge by that id;
- otherwise its text (or its ``article-title``) is kept as a text reference (``ref-text:...`` /
  ``ref-title:...``) and matched to a stored paper by title after the import, whichever of the two
  was imported first (:func:`resolve_text_references`); those no stored paper matches are counted.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..jsonl import TYPE_MAP, RecordError
from ..records import ImportProblem, PaperRecord, normalize_title
from .ids import arxiv_id, split_doi
from .stream import iter_json
from .text import clean as clean_text

FORMAT = "crossref"
TEXT_REF, TITLE_REF = "ref-text:", "ref-title:"
_MAX_TEXT_REF = 400
_WORK_KEYS = ("DOI", "reference-count", "is-referenced-by-count", "container-title", "member", "prefix")
# Bounded quantifiers and no overlapping repeats: reference texts come from user files.
_JATS_HEADING = re.compile(r"<jats:title>\s*(?:abstract|summary)\s*(?:[.:]\s*)?</jats:title>", re.I)
_JATS_BREAK = re.compile(r"</jats:(?:p|title|sec|list-item)>")
_DOI_IN_TEXT = re.compile(r"\b10\.\d{4,9}/[^\s\"<>]{1,200}")
_ARXIV_IN_TEXT = re.compile(
    r"arxiv[:\s]{1,3}((?:\d{4}\.\d{4,5}|[a-z][a-z.-]{0,20}/\d{7})(?:v\d{1,3})?)", re.I
)
_SEGMENT_BREAK = re.compile(r"[.?!,;]|[“”\"]|\(\d{4}[a-z]?\)")
_MIN_TITLE = 20  # normalised characters a text segment needs to be matched as a title
_MAX_WINDOW = 4  # consecutive segments tried together (titles with a comma, a full stop...)


def is_work(obj: Any) -> bool:
    """Whether ``obj`` is a Crossref work object (a DOI and Crossref-only fields)."""
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("DOI"), str)
        and sum(k in obj for k in _WORK_KEYS) >= 3
        and isinstance(obj.get("title", []), list)
    )


def response_kind(obj: Any) -> str:
    """``"works"`` for a works response or public-data file, the ``message-type`` of another
    Crossref response (``"member"``...), or ``""`` when ``obj`` is not a Crossref response."""
    if not isinstance(obj, dict):
        return ""
    if "message-type" in obj and "message" in obj:
        kind = str(obj["message-type"])
        return "works" if kind in ("work", "work-list") else kind
    items = obj.get("items")
    if isinstance(items, list) and (not items or is_work(items[0])):
        return "works"
    return ""


# -- a work ----------------------------------------------------------------------------------------
def jats_to_text(text: str) -> str:
    """A JATS abstract as plain text: the "Abstract" heading dropped, paragraphs kept apart."""
    text = _JATS_HEADING.sub(" ", text, count=1)
    return clean_text(_JATS_BREAK.sub(" ", text))


def _first(value: Any) -> str:
    if isinstance(value, list):
        value = next((v for v in value if isinstance(v, str) and v.strip()), "")
    return clean_text(value) if isinstance(value, str) else ""


def _authors(work: dict[str, Any]) -> list[str]:
    value = work.get("author")
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(f"'author' must be a list, not {type(value).__name__}")
    names = []
    for person in value:
        if not isinstance(person, dict):
            continue
        family, given = _first(person.get("family")), _first(person.get("given"))
        name = f"{family}, {given}" if family and given else family or _first(person.get("name"))
        if name:
            names.append(name)
    return names


def _year(work: dict[str, Any]) -> int | None:
    for field in ("issued", "published", "published-print", "published-online", "created"):
        parts = work.get(field, {}).get("date-parts") if isinstance(work.get(field), dict) else None
        if isinstance(parts, list) and parts and isinstance(parts[0], list) and parts[0]:
            year = parts[0][0]
            if isinstance(year, int) and not isinstance(year, bool) and 0 < year < 10000:
                return year
    return None


def reference_ref(ref: Any) -> str:
    """The ref one ``reference[]`` entry cites by: its DOI, a DOI or arXiv id in its text, or
    its text / article title as a text reference (``""`` when it has nothing)."""
    if not isinstance(ref, dict):
        return ""
    doi, arxiv = split_doi(ref.get("DOI"))
    if doi:
        return arxiv or doi
    text = clean_text(ref["unstructured"]) if isinstance(ref.get("unstructured"), str) else ""
    if m := _DOI_IN_TEXT.search(text):
        doi, arxiv = split_doi(m.group(0).rstrip(".,;)]"))
        return arxiv or doi
    if m := _ARXIV_IN_TEXT.search(text):
        return arxiv_id(m.group(1))
    if text:
        return TEXT_REF + text[:_MAX_TEXT_REF]
    title = normalize_title(_first(ref.get("article-title")))
    return TITLE_REF + title if len(title) >= _MIN_TITLE else ""


def _extra(work: dict[str, Any]) -> dict[str, str]:
    extra = {}
    for field, name in (("volume", "volume"), ("issue", "number"), ("publisher", "publisher")):
        if value := _first(work.get(field)):
            extra[name] = value
    if page := _first(work.get("page")):
        extra["pages"] = page.replace("-", "--", 1) if "--" not in page else page
    return extra


def record_from_work(work: Any, source: str, line: int) -> PaperRecord:
    """One Crossref work as a record; raises :class:`RecordError` naming what is wrong."""
    if not isinstance(work, dict):
        raise RecordError(f"expected a work object, got {type(work).__name__}")
    title = _first(work.get("title"))
    if subtitle := _first(work.get("subtitle")):
        title = f"{title}: {subtitle}" if title else subtitle
    if not title:
        raise RecordError("no title")
    doi, arxiv = split_doi(work.get("DOI"))
    refs = work.get("reference") or []
    if not isinstance(refs, list):
        raise RecordError(f"'reference' must be a list, not {type(refs).__name__}")
    raw_type = work.get("type") if isinstance(work.get("type"), str) else ""
    abstract = work.get("abstract")
    return PaperRecord(
        title=title,
        abstract=jats_to_text(abstract) if isinstance(abstract, str) else "",
        authors=_authors(work),
        year=_year(work),
        venue=_first(work.get("container-title")),
        entry_type=TYPE_MAP.get(raw_type.lower(), "misc") if raw_type else "article",
        key=doi,
        doi=doi,
        arxiv=arxiv,
        source=source,
        source_line=line,
        references=list(dict.fromkeys(r for r in map(reference_ref, refs) if r)),
        extra=_extra(work),
        subjects=[s for s in work.get("subject") or [] if isinstance(s, str)],  # for --field
    )


def _works(value: Any) -> list[tuple[str, Any]]:
    """The works in one JSON value, each with where it sits (``message.items[3]``)."""
    if isinstance(value, dict) and "message" in value:
        message = value["message"]
        if isinstance(message, dict) and isinstance(message.get("items"), list):
            return [(f"message.items[{i}]", w) for i, w in enumerate(message["items"])]
        return [("message", message)]
    if isinstance(value, dict) and isinstance(value.get("items"), list):
        return [(f"items[{i}]", w) for i, w in enumerate(value["items"])]
    return [("", value)]


def iter_crossref(path: str | Path) -> Iterator[PaperRecord | ImportProblem]:
    """The works of a Crossref response, public data file or JSON Lines file, streaming."""
    source = str(path)
    for item in iter_json(Path(path)):
        if isinstance(item, ImportProblem):
            yield item
            continue
        line, value = item
        kind = response_kind(value)
        if kind and kind != "works":
            yield ImportProblem(source, line, f"a Crossref '{kind}' response, not works")
            continue
        for where, work in _works(value):
            try:
                yield record_from_work(work, source, line)
            except RecordError as exc:
                yield ImportProblem(source, line, f"{where}: {exc}" if where else str(exc))


# -- text references, after the import ---------------------------------------------------------------
@dataclass
class TextRefStats:
    """Text references (no DOI or arXiv id) matched to a stored paper by title, and not."""

    matched: int = 0
    unmatched: int = 0


def title_candidates(ref: str) -> list[str]:
    """Normalised titles a text reference may contain: the pieces between its punctuation and
    years (``Levins R (1966) The strategy of model building. American Scientist 54``), alone and
    with up to three neighbours (a title with a comma or a full stop in it)."""
    if ref.startswith(TITLE_REF):
        return [ref[len(TITLE_REF) :]]
    segments = [normalize_title(s) for s in _SEGMENT_BREAK.split(ref[len(TEXT_REF) :])]
    segments = [s for s in segments if s]
    out: list[str] = []
    for size in range(1, _MAX_WINDOW + 1):
        for i in range(len(segments) - size + 1):
            title = " ".join(segments[i : i + size])
            if len(title) >= _MIN_TITLE and title.count(" ") >= 2 and title not in out:
                out.append(title)
    return out


def resolve_text_references(conn: sqlite3.Connection) -> TextRefStats:
    """Point unresolved text references at the stored paper whose title one of them contains
    (exact normalised title; a title shared by two papers picks neither), inside the caller's
    transaction; returns how many matched now and how many remain unmatched."""
    stats = TextRefStats()
    rows = conn.execute(
        "SELECT citing, cited_ref FROM citations WHERE cited IS NULL AND "
        "((cited_ref >= ? AND cited_ref < ?) OR (cited_ref >= ? AND cited_ref < ?))",
        (TEXT_REF, TEXT_REF[:-1] + ";", TITLE_REF, TITLE_REF[:-1] + ";"),
    ).fetchall()
    for citing, ref in rows:
        pid = _match_title(conn, title_candidates(ref))
        if pid is None or pid == citing:
            stats.unmatched += 1
            continue
        conn.execute("UPDATE citations SET cited=? WHERE citing=? AND cited_ref=?", (pid, citing, ref))
        stats.matched += 1
    return stats


def _match_title(conn: sqlite3.Connection, titles: list[str]) -> int | None:
    for title in titles:
        rows = conn.execute("SELECT id FROM papers WHERE norm_title=? LIMIT 2", (title,)).fetchall()
        if len(rows) == 1:
            return int(rows[0][0])
    return None
