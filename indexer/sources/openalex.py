"""OpenAlex works: the snapshot (gzipped JSON Lines parts, one work a line) and API JSON (a
``/works`` page ``{"meta", "results": [...]}`` or one work), as they are published.

What a work gives (``official_docs`` of the sample; the Work object): the title, the abstract from
``abstract_inverted_index`` (OpenAlex may not ship abstracts as text), authors from
``authorships``, the year, the venue from ``primary_location.source.display_name``, the type
(``type_crossref`` where present: it tells a proceedings paper from a journal article), every id
(``ids``: the W id, DOI, MAG, PubMed, PubMed Central; an arXiv id from a location on arxiv.org or
an arXiv DOI) and ``referenced_works`` as citation edges (by W id: they resolve to every work of
any import that has that W id).

Why the paper's key is the bare W id: JSON Lines imports of OpenAlex works (indexer/jsonl.py) used
it, so references between such records still resolve.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..jsonl import TYPE_MAP, RecordError, abstract_from_inverted_index
from ..records import ImportProblem, PaperRecord
from .ids import PaperIds, openalex_key, scheme_ref
from .stream import iter_json
from .text import clean as clean_text

FORMAT = "openalex"
_ARXIV_URL = re.compile(r"https?://(?:www\.)?arxiv\.org/(?:abs|pdf)/([^\s?#]{1,64}?)(?:\.pdf)?/?")
_YEAR = re.compile(r"(\d{4})")
# OpenAlex entity ids other than works: what a snapshot part of another entity type holds.
ENTITY_KINDS = {
    "A": "authors",
    "S": "sources",
    "I": "institutions",
    "C": "concepts",
    "P": "publishers",
    "F": "funders",
    "T": "topics",
}


def is_work(obj: Any) -> bool:
    """Whether ``obj`` is an OpenAlex work (its id is a W id at openalex.org)."""
    if not isinstance(obj, dict):
        return False
    oid = obj.get("id")
    return isinstance(oid, str) and oid.startswith("https://openalex.org/W")


def entity_kind(obj: Any) -> str:
    """``"works"``, another OpenAlex entity type (``"authors"``...), or ``""`` for no entity."""
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
        return ""
    oid = obj["id"]
    if not oid.startswith("https://openalex.org/") or len(oid) <= len("https://openalex.org/"):
        return ""
    letter = oid[len("https://openalex.org/")]
    return "works" if letter == "W" else ENTITY_KINDS.get(letter, "")


def is_page(obj: Any) -> bool:
    """An API list page: ``{"meta": {...}, "results": [...]}``."""
    return (
        isinstance(obj, dict) and isinstance(obj.get("results"), list) and isinstance(obj.get("meta"), dict)
    )


def _str(value: Any) -> str:
    return clean_text(value) if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _ids(work: dict[str, Any]) -> PaperIds:
    ids = PaperIds()
    given = _dict(work.get("ids"))
    ids.add("openalex", work.get("id"))
    ids.add("doi", work.get("doi") or given.get("doi"))
    for scheme in ("mag", "pmid", "pmcid"):
        ids.add(scheme, given.get(scheme))
    for loc in [work.get("primary_location"), *(work.get("locations") or [])]:
        url = _dict(loc).get("landing_page_url")
        if isinstance(url, str) and (m := _ARXIV_URL.fullmatch(url)):
            ids.add("arxiv", m.group(1))
            break
    return ids


def _authors(work: dict[str, Any]) -> list[str]:
    value = work.get("authorships")
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(f"'authorships' must be a list, not {type(value).__name__}")
    names = []
    for item in value:
        item = _dict(item)
        name = _str(_dict(item.get("author")).get("display_name")) or _str(item.get("raw_author_name"))
        if name:
            names.append(name)
    return names


def _year(work: dict[str, Any]) -> int | None:
    year = work.get("publication_year")
    if isinstance(year, int) and not isinstance(year, bool) and -9999 <= year <= 9999:
        return year
    date = work.get("publication_date")
    m = _YEAR.match(date) if isinstance(date, str) else None
    return int(m.group(1)) if m else None


def _entry_type(work: dict[str, Any]) -> str:
    for field in ("type_crossref", "type"):
        raw = work.get(field)
        if isinstance(raw, str) and raw:
            return TYPE_MAP.get(raw.lower(), "misc")
    return "article"


def abstract_text(index: Any) -> str:
    """The abstract an ``abstract_inverted_index`` (``{word: [positions]}``) spells, in order.

    Positions are normally 0..n-1 without a gap: the words go straight into a list of n slots
    (24 us for a 580-word abstract; the checked path of indexer/jsonl.py takes 0.5 ms, more than
    the rest of a work's import). Anything else (gaps, repeats, bad values) takes that checked
    path, which reports malformed positions."""
    if not isinstance(index, dict):
        return abstract_from_inverted_index(index)
    try:
        slots: list[str | None] = [None] * sum(map(len, index.values()))
        for word, positions in index.items():
            for pos in positions:  # a position that is not an int or is out of range: TypeError / IndexError
                slots[pos] = word
        if None in slots:
            raise IndexError("a gap or a repeated position")
    except (IndexError, TypeError):
        return abstract_from_inverted_index(index)
    text = " ".join(slots)  # type: ignore[arg-type]
    # Words without whitespace or markup (nearly all) join into text that clean_text would return
    # unchanged: one scan of the distinct words instead of its split and join (20 us of 55).
    return text if "" not in index and _NOT_PLAIN.search("".join(index)) is None else clean_text(text)


# A character that makes clean_text change a text: whitespace (re's \s is str.split's set) or
# the start of markup.
_NOT_PLAIN = re.compile(r"[\s<&]")
_WORK_URL = "https://openalex.org/W"


def _work_ref(item: Any) -> str:
    if isinstance(item, str) and item.startswith(_WORK_URL) and item[len(_WORK_URL) :].isdigit():
        return "openalex:W" + item[len(_WORK_URL) :]  # the usual spelling, without the regex
    return scheme_ref("openalex", item)


# Every reference in the usual spelling: checked and rewritten in C for the whole list at once
# (2 us for 20 references, against 20 us one by one).
_WORK_URLS = re.compile(r"(?:https://openalex\.org/W\d+\n)*https://openalex\.org/W\d+")


def _references(work: dict[str, Any]) -> list[str]:
    value = work.get("referenced_works")
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(f"'referenced_works' must be a list of W ids, not {type(value).__name__}")
    try:
        joined = "\n".join(value)
    except TypeError:  # an item that is not a string: one by one
        joined = ""
    if joined.count("\n") == len(value) - 1 and _WORK_URLS.fullmatch(joined):
        return list(dict.fromkeys(joined.replace(_WORK_URL, "openalex:W").split("\n")))
    return list(dict.fromkeys(ref for item in value if (ref := _work_ref(item))))


def _extra(work: dict[str, Any]) -> dict[str, str]:
    extra: dict[str, str] = {}
    biblio = _dict(work.get("biblio"))
    for field, name in (("volume", "volume"), ("issue", "number")):
        if value := _str(biblio.get(field)):
            extra[name] = value
    first, last = _str(biblio.get("first_page")), _str(biblio.get("last_page"))
    if first:
        extra["pages"] = f"{first}--{last}" if last and last != first else first
    source = _dict(_dict(work.get("primary_location")).get("source"))
    if publisher := _str(source.get("host_organization_name")):
        extra["publisher"] = publisher
    return extra


def _keywords(work: dict[str, Any]) -> str:
    words = [
        _str(_dict(k).get("display_name") or _dict(k).get("keyword")) for k in work.get("keywords") or []
    ]
    return ", ".join(w for w in words if w)


def _subjects(work: dict[str, Any]) -> list[str]:
    """What ``--field`` matches (indexer/filters.py): each topic's name, subfield, field and
    domain, and the legacy concepts' names."""
    names = []
    for topic in work.get("topics") or []:
        topic = _dict(topic)
        names.append(topic.get("display_name"))
        names += [_dict(topic.get(level)).get("display_name") for level in ("subfield", "field", "domain")]
    names += [_dict(concept).get("display_name") for concept in work.get("concepts") or []]
    return list(dict.fromkeys(n for n in names if isinstance(n, str) and n))


def record_from_work(work: Any, source: str, line: int) -> PaperRecord:
    """One OpenAlex work as a record; raises :class:`RecordError` naming what is wrong."""
    if not isinstance(work, dict):
        raise RecordError(f"expected a work object, got {type(work).__name__}")
    kind = entity_kind(work)
    if kind and kind != "works":
        raise RecordError(f"an OpenAlex {kind} record, not a work")
    title = _str(work.get("title")) or _str(work.get("display_name"))
    if not title:
        raise RecordError("no title")
    index = work.get("abstract_inverted_index")
    abstract = abstract_text(index) if index else ""
    ids = _ids(work)
    venue_source = _dict(_dict(work.get("primary_location")).get("source"))
    venue = _str(venue_source.get("display_name")) or _str(_dict(work.get("host_venue")).get("display_name"))
    return PaperRecord(
        title=title,
        abstract=abstract,
        authors=_authors(work),
        year=_year(work),
        venue=venue,
        entry_type=_entry_type(work),
        keywords=_keywords(work),
        key=openalex_key(work.get("id")),
        doi=ids.doi,
        arxiv=ids.arxiv,
        source=source,
        source_line=line,
        references=_references(work),
        extra=_extra(work),
        ids=ids.refs,
        subjects=_subjects(work),
    )


def _works(value: Any) -> list[tuple[str, Any]]:
    """The works in one JSON value, each with where it sits (``results[3]``) for messages."""
    if is_page(value):
        return [(f"results[{i}]", w) for i, w in enumerate(value["results"])]
    if isinstance(value, list):
        return [(f"[{i}]", w) for i, w in enumerate(value)]
    return [("", value)]


def iter_openalex(path: str | Path) -> Iterator[PaperRecord | ImportProblem]:
    """The works of a snapshot part or an API response, streaming; a bad work is reported with
    its line (and its place in a page) and skipped."""
    source = str(path)
    for item in iter_json(Path(path)):
        if isinstance(item, ImportProblem):
            yield item
            continue
        line, value = item
        for where, work in _works(value):
            try:
                yield record_from_work(work, source, line)
            except RecordError as exc:
                yield ImportProblem(source, line, f"{where}: {exc}" if where else str(exc))
