"""Import JSON Lines paper dumps (one JSON object per line; schema in ``docs/jsonl-schema.md``).

JSON Lines is how large scholarly dumps ship (S2ORC, OpenAlex, Semantic Scholar), and it is the
only citewise input that carries a citation graph (``references``). The reader accepts the
documented citewise schema plus the common spellings of those dumps (``display_name``,
``publication_year``, ``authorships``, ``abstract_inverted_index``, ``referenced_works``,
``outbound_citations``, ``externalIds``...), so a dump can be imported without conversion.

Each line is decoded and validated on its own: a line that is not valid UTF-8 or JSON, or whose
fields have the wrong shape, becomes an :class:`ImportProblem` with file and line number and the
rest of the file still imports. ``.gz`` and ``.zst`` files are read transparently.

Why ``key`` is the record ``id`` (and ``bibtex_key`` goes to ``extra``): references name other
records by id, and the store resolves citations by matching them against ``key``; a separate
BibTeX key would break that link. The BibTeX writer uses ``extra["bibtex_key"]`` when present.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .records import ImportProblem, PaperRecord, RecordError, normalize_arxiv, normalize_doi
from .texclean import clean_text

# Source document types (BibTeX, Crossref/OpenAlex, Semantic Scholar) -> BibTeX entry type.
TYPE_MAP: dict[str, str] = {
    "article": "article",
    "journal-article": "article",
    "journalarticle": "article",
    "journal": "article",
    "review": "article",
    "letter": "article",
    "editorial": "article",
    "inproceedings": "inproceedings",
    "proceedings-article": "inproceedings",
    "conference": "inproceedings",
    "conference-paper": "inproceedings",
    "paper-conference": "inproceedings",
    "book": "book",
    "monograph": "book",
    "edited-book": "book",
    "proceedings": "proceedings",
    "book-chapter": "incollection",
    "incollection": "incollection",
    "inbook": "inbook",
    "bookchapter": "incollection",
    "chapter": "incollection",
    "phdthesis": "phdthesis",
    "dissertation": "phdthesis",
    "thesis": "phdthesis",
    "mastersthesis": "mastersthesis",
    "techreport": "techreport",
    "report": "techreport",
    "preprint": "misc",
    "posted-content": "misc",
    "misc": "misc",
    "dataset": "misc",
    "other": "misc",
    "unpublished": "unpublished",
    "manual": "manual",
    "booklet": "booklet",
}

# Top-level fields copied to ``extra`` (as strings) when present.
EXTRA_FIELDS = (
    "pages",
    "publisher",
    "volume",
    "number",
    "issue",
    "url",
    "month",
    "editor",
    "note",
    "address",
    "isbn",
    "issn",
    "series",
)

_OPENALEX_PREFIX = re.compile(r"^https?://openalex\.org/", re.I)
_DOI_LIKE = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)?10\.\d+(?:\.\d+)*/\S+$", re.I)
_ARXIV_LIKE = re.compile(
    r"^(?:(?:arxiv:|https?://arxiv\.org/abs/)\s*\S+|\d{4}\.\d{4,5}(?:v\d+)?|[a-z\-]+(?:\.[a-z]{2})?/\d{7}(?:v\d+)?)$",
    re.I,
)
_YEAR = re.compile(r"^\s*(\d{4})")
# "A and B": the lookbehind starts a match only where a whitespace run starts (a plain
# ``\s+and\s+`` retried at every space of a long run, which is quadratic).
_AND_SPLIT = re.compile(r"(?<!\s)\s+and\s+")


def normalize_ref(ref: str) -> str:
    """One spelling per identifier, so references match stored papers (DOI / arXiv / plain id)."""
    ref = _OPENALEX_PREFIX.sub("", ref.strip())
    if _DOI_LIKE.match(ref):
        return normalize_doi(ref)
    if _ARXIV_LIKE.match(ref):
        return normalize_arxiv(ref)
    return ref


def _text(obj: dict[str, Any], *names: str) -> str:
    """First present field among ``names`` as clean text (HTML stripped, whitespace collapsed)."""
    for name in names:
        value = obj.get(name)
        if value is None or value == "":
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise RecordError(f"'{name}' must be a string, not {type(value).__name__}")
        return clean_text(value)
    return ""


def abstract_from_inverted_index(index: Any) -> str:
    """OpenAlex ships abstracts as ``{word: [positions]}``; put the words back in order."""
    if not isinstance(index, dict):
        raise RecordError("'abstract_inverted_index' must be an object of word -> [positions]")
    slots: dict[int, str] = {}
    for word, positions in index.items():
        if not isinstance(positions, list) or not all(isinstance(p, int) and p >= 0 for p in positions):
            raise RecordError(f"'abstract_inverted_index' positions of {word!r} must be a list of integers")
        for pos in positions:
            slots[pos] = word
    return clean_text(" ".join(slots[i] for i in sorted(slots)))


def _person(item: Any, where: str) -> str:
    """One author: a string, ``{"name"}``, ``{"first", "last"}`` or an OpenAlex authorship."""
    if isinstance(item, str):
        return clean_text(item)
    if not isinstance(item, dict):
        raise RecordError(f"{where} must be a string or an object, not {type(item).__name__}")
    if isinstance(item.get("author"), dict):  # OpenAlex authorship
        item = item["author"]
    last = _text(item, "last", "family", "last_name", "lastname")
    first_parts = [_text(item, "first", "given", "first_name", "firstname")]
    middle = item.get("middle")
    if isinstance(middle, list):
        first_parts.extend(clean_text(m) for m in middle if isinstance(m, str))
    elif isinstance(middle, str):
        first_parts.append(clean_text(middle))
    first = " ".join(p for p in first_parts if p)
    suffix = _text(item, "suffix")
    if last:
        name = f"{last}, {suffix}, {first}" if suffix and first else f"{last}, {first}" if first else last
        return name
    return _text(item, "name", "display_name", "raw_author_name", "full_name")


def _authors(obj: dict[str, Any]) -> list[str]:
    for field in ("authors", "authorships", "author"):
        value = obj.get(field)
        if value is None:
            continue
        if isinstance(value, str):  # a BibTeX-style "A and B" list
            return [clean_text(n) for n in _AND_SPLIT.split(value) if n.strip()]
        if not isinstance(value, list):
            raise RecordError(f"'{field}' must be a list, not {type(value).__name__}")
        names = [_person(item, f"'{field}'[{i}]") for i, item in enumerate(value)]
        return [n for n in names if n]
    return []


def _year(obj: dict[str, Any]) -> int | None:
    for field in ("year", "publication_year"):
        value = obj.get(field)
        if value is None or value == "":
            continue
        if isinstance(value, bool):
            raise RecordError(f"'{field}' must be a year, not a boolean")
        if isinstance(value, int):
            if not -9999 <= value <= 9999:  # SQLite cannot even store some of these
                raise RecordError(f"'{field}' must be a year like 2020, got {value}")
            return value
        if isinstance(value, str) and (m := _YEAR.match(value)):
            return int(m.group(1))
        raise RecordError(f"'{field}' must be a year like 2020, got {value!r}")
    date = obj.get("publication_date")
    if isinstance(date, str) and (m := _YEAR.match(date)):
        return int(m.group(1))
    return None


def _venue(obj: dict[str, Any]) -> str:
    venue = _text(obj, "venue", "journal", "booktitle", "container_title")
    if venue:
        return venue
    for outer, inner in (("primary_location", "source"), ("host_venue", None)):
        node = obj.get(outer)
        if isinstance(node, dict) and inner:
            node = node.get(inner)
        if isinstance(node, dict):
            venue = _text(node, "display_name", "name")
            if venue:
                return venue
    return ""


def _ref_id(item: Any, where: str) -> str:
    if isinstance(item, str):
        return normalize_ref(item)
    if isinstance(item, dict):
        if isinstance(
            item.get("citedPaper"), dict
        ):  # Semantic Scholar: {"citedPaper": {...}, "contexts": [...]}
            item = item["citedPaper"]
        for name in ("doi", "arxiv", "id", "paperId", "paper_id"):
            value = item.get(name)
            if isinstance(value, str) and value.strip():
                return normalize_ref(value)
        ext = item.get("externalIds")
        if isinstance(ext, dict):
            for name in ("DOI", "ArXiv"):
                if isinstance(ext.get(name), str):
                    return normalize_ref(ext[name])
        return ""
    raise RecordError(f"{where} must be an id string or an object, not {type(item).__name__}")


def _references(obj: dict[str, Any]) -> list[str]:
    for field in ("references", "referenced_works", "outbound_citations"):
        value = obj.get(field)
        if value is None:
            continue
        if not isinstance(value, list):
            raise RecordError(f"'{field}' must be a list of ids, not {type(value).__name__}")
        refs = [_ref_id(item, f"'{field}'[{i}]") for i, item in enumerate(value)]
        return list(dict.fromkeys(r for r in refs if r))  # drop empties and repeats, keep order
    return []


def _reference_contexts(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """(cited id, citing sentence) of references given as objects with ``contexts`` (a list of
    sentences, or one ``context``); Semantic Scholar's ``{"citedPaper": {...}, "contexts": [...]}``
    too. What the citing paper says about a reference indexes the cited paper (citations.py)."""
    out: list[tuple[str, str]] = []
    for field_name in ("references", "referenced_works", "outbound_citations"):
        value = obj.get(field_name)
        if value is None:
            continue
        if not isinstance(value, list):
            return []  # reported by _references
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            contexts = item.get("contexts", item.get("context"))
            contexts = [contexts] if isinstance(contexts, str) else contexts
            if not isinstance(contexts, list) or not contexts:
                continue
            ref = _ref_id(item, f"'{field_name}'[{i}]")
            out.extend((ref, clean_text(c)) for c in contexts if ref and isinstance(c, str) and c.strip())
        break
    return out


def _keywords(obj: dict[str, Any]) -> str:
    value = obj.get("keywords")
    if value is None:
        return ""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        words = []
        for i, item in enumerate(value):
            if isinstance(item, dict):  # OpenAlex: {"keyword"/"display_name": ...}
                item = item.get("keyword") or item.get("display_name") or ""
            if not isinstance(item, str):
                raise RecordError(f"'keywords'[{i}] must be a string")
            if item.strip():
                words.append(clean_text(item))
        return ", ".join(words)
    raise RecordError(f"'keywords' must be a list or a comma-separated string, not {type(value).__name__}")


def _ids(obj: dict[str, Any]) -> dict[str, str]:
    """DOI / arXiv / ACL ids from top-level fields or an ``ids`` / ``externalIds`` object."""
    out = {
        "doi": _text(obj, "doi", "DOI"),
        "arxiv": _text(obj, "arxiv", "arxiv_id", "arXiv"),
        "acl": _text(obj, "acl_id", "acl"),
    }
    for holder in ("ids", "externalIds", "external_ids"):
        ids = obj.get(holder)
        if not isinstance(ids, dict):
            continue
        lowered = {str(k).lower(): v for k, v in ids.items() if isinstance(v, str)}
        out["doi"] = out["doi"] or lowered.get("doi", "")
        out["arxiv"] = out["arxiv"] or lowered.get("arxiv", "")
        out["acl"] = out["acl"] or lowered.get("acl", "")
    return out


def record_from_json(obj: Any, source: str, line: int) -> PaperRecord:
    """One decoded JSON object to a record; raises :class:`RecordError` naming the bad field."""
    if not isinstance(obj, dict):
        raise RecordError(f"expected a JSON object, got {type(obj).__name__}")
    title = _text(obj, "title", "display_name")
    if not title:
        raise RecordError("no title")
    abstract = _text(obj, "abstract")
    if not abstract and obj.get("abstract_inverted_index") is not None:
        abstract = abstract_from_inverted_index(obj["abstract_inverted_index"])
    raw_type = _text(obj, "type", "entry_type", "ENTRYTYPE").lower()
    entry_type = TYPE_MAP.get(raw_type, "misc") if raw_type else "article"
    rec_id = _OPENALEX_PREFIX.sub("", _text(obj, "id", "paper_id", "paperId", "corpusid"))
    bibtex_key = _text(obj, "bibtex_key", "citation_key")
    extra: dict[str, str] = {}
    for name in EXTRA_FIELDS:
        value = _text(obj, name)
        if value:
            extra["number" if name == "issue" else name] = value
    custom = obj.get("extra")
    if custom is not None:
        if not isinstance(custom, dict):
            raise RecordError("'extra' must be an object of field -> string")
        for name, value in custom.items():
            if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
                extra[str(name)] = clean_text(str(value))
    if bibtex_key:
        extra["bibtex_key"] = bibtex_key
    ids = _ids(obj)
    return PaperRecord(
        title=title,
        abstract=abstract,
        authors=_authors(obj),
        year=_year(obj),
        venue=_venue(obj),
        entry_type=entry_type,
        keywords=_keywords(obj),
        key=rec_id or bibtex_key,
        doi=ids["doi"],
        arxiv=ids["arxiv"],
        acl_id=ids["acl"],
        source=source,
        source_line=line,
        references=_references(obj),
        reference_contexts=_reference_contexts(obj),
        extra=extra,
    )


def iter_jsonl(path: str) -> Iterator[PaperRecord | ImportProblem]:
    """Yield a record (or a problem) per non-blank line of a JSON Lines file, streaming."""
    # The compressed-file reader of the open sources (gzip or Zstandard by the first bytes): it
    # reads every valid member and then says where the archive is cut or followed by garbage,
    # where gzip.open dropped the last records at trailing bytes and could not read .zst at all.
    from .sources.stream import check_complete, open_binary

    path = str(path)
    lineno = 0
    try:
        # By name, as before: a plain .jsonl whose first bytes look like gzip is still text.
        compressed = path.endswith((".gz", ".zst", ".zstd"))
        with open_binary(Path(path)) if compressed else open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.endswith(b"\n"):
                    check_complete(fh)  # the last line of a cut archive is part of the damage
                if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                if not raw.strip():
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    yield ImportProblem(path, lineno, f"not UTF-8 (byte {exc.start + 1}: {exc.reason})")
                    continue
                try:
                    obj = json.loads(text)
                except json.JSONDecodeError as exc:
                    yield ImportProblem(path, lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
                    continue
                except RecursionError:  # one line must not end the file (it is no ValueError)
                    yield ImportProblem(path, lineno, "invalid JSON: nested too deeply to read")
                    continue
                try:
                    yield record_from_json(obj, path, lineno)
                except RecordError as exc:
                    yield ImportProblem(path, lineno, str(exc))
            check_complete(fh)
    except (OSError, EOFError) as exc:  # unreadable file, truncated or corrupt gzip
        yield ImportProblem(
            path,
            lineno + 1 if lineno else 0,
            f"cannot read: {getattr(exc, 'strerror', None) or exc}",
            incomplete=True,
        )
