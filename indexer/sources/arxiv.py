"""The arXiv metadata snapshot (Kaggle's ``arxiv-metadata-oai-snapshot.json``: JSON Lines, one
paper a line), as it is published.

A line has ``id`` (``0704.0001``, ``2101.00001v2`` in some copies, old-style ``cs/0101001``),
``title``, ``abstract`` and ``authors`` in TeX (``C. Bal\\'azs``, ``$(k,\\ell)$``),
``authors_parsed`` (``[last, first, suffix]``), ``categories`` (space-separated), ``doi`` (one or
more, space-separated), ``journal-ref`` and ``versions`` (the first one dates the paper).

Why the year of the first version: it is when the paper became citable, and an arXiv id's own
year-month says the same; the journal version (``journal-ref``) may be years later, and it is
matched by its DOI, not by title and year. The categories go to ``extra`` (``primaryclass`` for
BibTeX, ``categories`` for filters), not to the keywords: ``hep-ph`` is no word a sentence uses.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..jsonl import RecordError
from ..records import ImportProblem, PaperRecord
from ..texclean import tex_to_unicode
from .ids import arxiv_id, split_doi
from .stream import iter_converted

FORMAT = "arxiv"
_SNAPSHOT_KEYS = ("authors_parsed", "versions", "categories", "submitter")
_NEW_ID = re.compile(r"(\d{2})(\d{2})\.\d{4,5}")
_OLD_ID = re.compile(r"[a-z][a-z.-]{0,30}/(\d{2})(\d{2})\d{3}")
_YEAR = re.compile(r"\b(1[89]\d{2}|20\d{2})\b")
# (``(?<!\s)``: a match starts only where a whitespace run starts, so long runs stay linear.)
_TEX_SPECIALS = frozenset("\\{}$~<&-`'^\"")
_AUTHOR_SPLIT = re.compile(r",\s*(?:and\s+)?|(?<!\s)\s+and\s+")


def is_snapshot_line(obj: Any) -> bool:
    """Whether ``obj`` is a snapshot record: an ``id`` and at least two snapshot-only fields."""
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("id"), str)
        and sum(k in obj for k in _SNAPSHOT_KEYS) >= 2
        and "title" in obj
    )


def _tex(text: str) -> str:
    """``tex_to_unicode`` where the text has TeX or markup in it; whitespace collapsed else (most
    author names and many titles: the full pass costs more than the rest of the record)."""
    if _TEX_SPECIALS.isdisjoint(text):
        return " ".join(text.split())
    return tex_to_unicode(text)


def _year(obj: dict[str, Any], aid: str) -> int | None:
    versions = obj.get("versions")
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        created = versions[0].get("created")
        if isinstance(created, str) and (m := _YEAR.search(created)):
            return int(m.group(1))
    m = _NEW_ID.fullmatch(aid) or _OLD_ID.fullmatch(aid)
    if m:
        yy = int(m.group(1))
        return 1900 + yy if yy >= 91 else 2000 + yy  # arXiv began in August 1991
    date = obj.get("update_date")
    m = _YEAR.search(date) if isinstance(date, str) else None
    return int(m.group(1)) if m else None


def _authors(obj: dict[str, Any]) -> list[str]:
    parsed = obj.get("authors_parsed")
    if isinstance(parsed, list) and parsed:
        names = []
        for entry in parsed:
            if not isinstance(entry, list) or not entry or not all(isinstance(p, str) for p in entry):
                raise RecordError("'authors_parsed' must be a list of [last, first, suffix] lists")
            last, first, suffix = [_tex(p) for p in (entry + ["", ""])[:3]]
            if last:
                parts = [last, suffix, first] if suffix and first else [last, first]
                names.append(", ".join(p for p in parts if p))
        return names
    raw = obj.get("authors")
    if isinstance(raw, str):
        return [n for n in (_tex(a) for a in _AUTHOR_SPLIT.split(raw)) if n]
    return []


def _str(obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RecordError(f"'{name}' must be a string, not {type(value).__name__}")
    return value


def record_from_line(obj: Any, source: str, line: int) -> PaperRecord:
    """One snapshot line as a record; raises :class:`RecordError` naming what is wrong."""
    if not isinstance(obj, dict):
        raise RecordError(f"expected an object, got {type(obj).__name__}")
    aid = arxiv_id(_str(obj, "id"))
    if not aid:
        raise RecordError("no arXiv 'id'")
    title = _tex(_str(obj, "title"))
    if not title:
        raise RecordError("no title")
    dois = _str(obj, "doi").split()
    doi = split_doi(dois[0])[0] if dois else ""
    journal = _tex(_str(obj, "journal-ref"))
    categories = _str(obj, "categories").split()
    extra = {"primaryclass": categories[0], "categories": " ".join(categories)} if categories else {}
    return PaperRecord(
        title=title,
        abstract=_tex(_str(obj, "abstract")),
        authors=_authors(obj),
        year=_year(obj, aid),
        venue=journal,
        entry_type="article" if journal else "misc",
        key=aid,
        doi=doi,
        arxiv=aid,
        source=source,
        source_line=line,
        extra=extra,
    )


def iter_arxiv(path: str | Path) -> Iterator[PaperRecord | ImportProblem]:
    """The records of a snapshot file (plain, ``.gz`` or ``.zst``), streaming."""
    return iter_converted(path, lambda obj, source, line: [record_from_line(obj, source, line)])
