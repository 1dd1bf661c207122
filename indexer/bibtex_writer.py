"""The BibTeX entry citewise inserts into a user's ``.bib`` when they accept a recommendation.

The entry must compile, keep the user's own library intact, and carry a key the user would
have chosen. :func:`bibtex_entry` decides between two cases:

* **The user's own entry** (the paper was imported from a ``.bib`` whose text we keep in
  ``paper.bibtex``, its key is a usable cite key and the text is not a web export): the original
  text is returned byte for byte with its own key. Their library is the authority (Better BibTeX
  keys, hand-fixed capitalisation...); we never "improve" it. The caller (or the ``keep_original``
  argument) can decide otherwise, e.g. from where the source file lives.
* **Anything else** -- a bulk export such as the ACM Digital Library's (DOI keys, ``&amp;``,
  ``<sup>``, Unicode dashes), ACL Anthology XML, JSON Lines: a clean entry is built. Values that
  came from BibTeX text are converted from that text by :func:`~.bibtex_tex.source_to_tex`
  (valid TeX kept, HTML turned into TeX, stray specials escaped, math checked), other values
  from the stored Unicode by :func:`~.tex_escape.tex_escape`; every value is checked for
  balanced braces and a field that is not is dropped rather than written.

Which fields a built entry carries is a setting (``fields=``: a preset name or a tuple of field
names). The default preset, ``"standard"``, is what bibliography styles print: authors, editors,
title, venue, year, month, volume, number, pages, publisher, address, organization, series,
edition, note, DOI, URL (not when it only repeats the DOI), arXiv id. It leaves out ``abstract``
(the main source of build errors -- stray ``%``, ``&``, ``$`` and half-written math live in
abstracts -- and of ``.bib`` bloat; no standard style prints it), ``keywords``, ``isbn``/``issn``
and ACM's ``location``/``numpages``/``articleno`` (``location`` even prints as the publisher's
city under biblatex). ``"full"`` keeps everything the record has; ``"minimal"`` is the bare
citation. A ``url`` that only repeats the DOI is never written (styles would print it twice).

Keys come from :mod:`~.bibtex_keys` (templates, uniqueness, which source keys are kept).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set

import bibtexparser

from .bibtex import split_authors
from .bibtex_keys import (
    DEFAULT_STYLE,
    FoldedKeys,
    first_word,
    folded,
    make_key,
    original_key,
    unique_key,
    usable_key,
)
from .bibtex_tex import balanced, source_to_tex
from .records import PaperRecord, normalize_doi
from .tex_escape import char_to_tex, clean_verbatim, tex_escape, tex_name, tex_title
from .texclean import tex_to_unicode

__all__ = [
    "DEFAULT_FIELDS",
    "DEFAULT_STYLE",
    "FIELD_PRESETS",
    "FoldedKeys",
    "bibtex_entry",
    "entry_key",
    "folded",
    "char_to_tex",
    "first_word",
    "format_entry",
    "is_users_entry",
    "make_key",
    "original_key",
    "tex_escape",
    "tex_name",
    "tex_title",
    "unique_key",
    "usable_key",
]

ENTRY_TYPES = frozenset(
    {
        "article",
        "book",
        "booklet",
        "inbook",
        "incollection",
        "inproceedings",
        "conference",
        "manual",
        "mastersthesis",
        "misc",
        "phdthesis",
        "proceedings",
        "techreport",
        "unpublished",
        "online",
        "report",
        "thesis",
        "dataset",
        "software",
    }
)

# Which field carries ``paper.venue`` for each entry type.
VENUE_FIELD: dict[str, str] = {
    "article": "journal",
    "inproceedings": "booktitle",
    "conference": "booktitle",
    "incollection": "booktitle",
    "inbook": "booktitle",
    "proceedings": "booktitle",
    "phdthesis": "school",
    "mastersthesis": "school",
    "thesis": "school",
    "techreport": "institution",
    "report": "institution",
}

# Preferred order of ``extra`` fields; the rest follow alphabetically.
EXTRA_ORDER = (
    "editor",
    "volume",
    "number",
    "pages",
    "publisher",
    "address",
    "month",
    "series",
    "edition",
    "isbn",
    "issn",
    "note",
    "url",
)

# Fields written verbatim (identifiers and addresses: escaping would corrupt them).
VERBATIM_FIELDS = frozenset({"doi", "url", "eprint", "isbn", "issn"})

# ``extra`` keys that are citewise bookkeeping, not BibTeX fields.
INTERNAL_EXTRA = frozenset({"bibtex_key", "id"})

# Fields written from the record's columns; an ``extra`` copy would make a duplicate field.
FIRST_CLASS_FIELDS = ("author", "title", "year", "doi", "eprint", "archiveprefix", "keywords", "abstract")

MONTH_MACROS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")

# Field presets for built entries (see the module docstring for why abstract is not in the default).
_VENUE_FIELDS = ("journal", "booktitle", "school", "institution", "howpublished")
FIELD_PRESETS: dict[str, frozenset[str] | None] = {
    "minimal": frozenset(
        (
            "author",
            "editor",
            "title",
            "year",
            "volume",
            "number",
            "pages",
            "doi",
            "eprint",
            "archiveprefix",
            *_VENUE_FIELDS,
        )
    ),
    "standard": frozenset(
        (
            "author",
            "editor",
            "title",
            "year",
            "month",
            "volume",
            "number",
            "pages",
            "publisher",
            "address",
            "organization",
            "series",
            "edition",
            "chapter",
            "note",
            "doi",
            "url",
            "eprint",
            "archiveprefix",
            "primaryclass",
            *_VENUE_FIELDS,
        )
    ),
    "full": None,  # every field the record has
}
DEFAULT_FIELDS = "standard"

# Text a web export leaves in BibTeX (HTML entities and tags): such text is not a library that builds.
_WEB_RESIDUE = re.compile(
    r"&(?:amp|lt|gt|quot|apos|nbsp|#[0-9]+|#[xX][0-9a-fA-F]+);"
    r"|</?(?:sup|sub|i|b|em|strong|scp|span|p|br|inf|italic|bold|inline-formula|tex-math|mml:[a-z]+)[\s/>]",
    re.I,
)
# A cite key that works with \cite, BibTeX, biber and every .bib parser; DOI-like keys are not readable.
# -- entries --------------------------------------------------------------------------------------


_MONTH_FULL = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH_NAMES: dict[str, str] = {"sept": "sep", "sept.": "sep"}
for _macro, _full in zip(MONTH_MACROS, _MONTH_FULL, strict=True):
    _MONTH_NAMES.update({_macro: _macro, _macro + ".": _macro, _full: _macro})


def _month(value: str) -> str | None:
    """A month as a BibTeX macro (``jul``), or None when it is not recognisably one month."""
    value = value.strip().lower()
    # isascii: "¹" and other Unicode digits pass isdigit() but are no month (int() refuses them)
    if value.isascii() and value.isdigit() and 1 <= int(value) <= 12:
        return MONTH_MACROS[int(value) - 1]
    return _MONTH_NAMES.get(value)


def _allowed_fields(fields: str | Iterable[str] | None, include_abstract: bool) -> frozenset[str] | None:
    """The field names a built entry may carry (None: all), from a preset name or a list of names."""
    if fields is None:
        fields = DEFAULT_FIELDS
    if isinstance(fields, str):
        if fields not in FIELD_PRESETS:
            raise ValueError(f"unknown BibTeX field preset {fields!r} (one of {', '.join(FIELD_PRESETS)})")
        allowed = FIELD_PRESETS[fields]
    else:
        allowed = frozenset(f.strip().lower() for f in fields)
    if allowed is not None and include_abstract:
        allowed = allowed | {"abstract"}
    return allowed


def _source_fields(paper: PaperRecord) -> dict[str, str]:
    """Field texts (lower-case names) of the paper's original BibTeX entry; {} when it has none.

    These keep what the stored Unicode lost: ``<sup>``, ``\\textit``, math, ``{{BERT}}``.
    """
    original = (paper.bibtex or "").strip()
    if not original:
        return {}
    try:
        library = bibtexparser.parse_string(original)
    except Exception:  # a text the importer parsed once; if the parser disagrees now, use the record
        return {}
    if not library.entries:
        return {}
    return {k.lower(): v.value for k, v in library.entries[0].fields_dict.items() if isinstance(v.value, str)}


def _text_tex(clean: str, source: str | None, *, title: bool = False) -> str:
    """TeX for a text field: converted from the source TeX when that says what the stored text says
    (the store may have merged in another source's value), else spelled from the stored text."""
    if source is not None and tex_to_unicode(source) == clean:
        tex = source_to_tex(source, title=title)
        if balanced(tex):
            return tex
    return tex_title(clean) if title else tex_escape(clean)


def _names_tex(names: list[str], source: str | None) -> str:
    """An ``author``/``editor`` list: from the source when it names the same people."""
    if source is not None and split_authors(source) == names:
        tex = source_to_tex(source)
        if balanced(tex) and split_authors(tex) == names:
            return tex
    return " and ".join(tex_name(n) for n in names)


# Any run of dashes in a page range (whitespace collapsed first): one en dash, written ``--``.
_PAGE_DASHES = re.compile(r" ?[\u2010-\u2015\u2212-]+ ?")


class _Fields:
    """The ``(name, value)`` lines of one entry as they are added, filtered by the field selection.

    A field whose TeX is unbalanced is dropped rather than written: one bad field must not break
    the whole .bib for BibTeX (it would swallow the entries after it)."""

    def __init__(self, allowed: frozenset[str] | None) -> None:
        self.allowed = allowed
        self.lines: list[tuple[str, str]] = []

    def wanted(self, name: str) -> bool:
        return self.allowed is None or name in self.allowed

    def add(self, name: str, tex: str, braced: bool = True) -> None:
        if not self.wanted(name) or not tex.strip():
            return
        if not balanced(tex):  # never write an entry that breaks the .bib: the field goes
            return
        self.lines.append((name, "{" + tex + "}" if braced else tex))


def _title_is_the_key(paper: PaperRecord, source: dict[str, str]) -> bool:
    """A title-less BibTeX entry, imported with its key as the displayed title
    (``indexer/bibtex.py``): a built entry must not make that key up into a title."""
    return bool(paper.bibtex) and "title" not in source and paper.title == paper.key


def _field_lines(
    paper: PaperRecord, include_abstract: bool = False, fields: str | Iterable[str] | None = None
) -> list[tuple[str, str]]:
    out = _Fields(_allowed_fields(fields, include_abstract))
    source = _source_fields(paper)
    if paper.authors and out.wanted("author"):
        out.add("author", _names_tex(paper.authors, source.get("author")))
    if not _title_is_the_key(paper, source):
        out.add("title", _text_tex(paper.title, source.get("title"), title=True))
    extra = _extra_fields(paper)
    venue_field = VENUE_FIELD.get(_entry_type(paper), "howpublished")
    if paper.venue and out.wanted(venue_field):
        venue_source = next(
            (
                source[f]
                for f in (venue_field, "booktitle", "journal", "journaltitle", "school")
                if f in source and tex_to_unicode(source[f]) == paper.venue
            ),
            None,
        )
        out.add(venue_field, _text_tex(paper.venue, venue_source))
        extra.pop(venue_field, None)
    if paper.year:
        out.add("year", str(paper.year))
    ordered = [k for k in EXTRA_ORDER if k in extra] + sorted(k for k in extra if k not in EXTRA_ORDER)
    for name in (n for n in ordered if out.wanted(n)):
        if (tex_braced := _extra_field_tex(paper, name, extra[name], source)) is not None:
            out.add(name, *tex_braced)
    if paper.doi:
        out.add("doi", clean_verbatim(paper.doi))
    if paper.arxiv:
        out.add("eprint", clean_verbatim(paper.arxiv))
        if any(name == "eprint" for name, _ in out.lines):
            out.add("archiveprefix", "arXiv")
    if paper.keywords and out.wanted("keywords"):
        out.add("keywords", _text_tex(paper.keywords, source.get("keywords")))
    if paper.abstract and out.wanted("abstract"):
        out.add("abstract", _text_tex(paper.abstract, source.get("abstract")))
    return out.lines


def _extra_fields(paper: PaperRecord) -> dict[str, str]:
    """The record's other BibTeX fields worth writing, by lower-case name.

    Internal bookkeeping, empty values and names BibTeX would not parse are left out, and so
    are the fields written from the record's own columns: an edited title must not be written
    twice, once new and once stale."""
    extra = {
        k.lower(): v
        for k, v in (paper.extra or {}).items()
        if k.lower() not in INTERNAL_EXTRA
        and isinstance(v, str)
        and v.strip()
        and re.fullmatch(r"[a-z][a-z0-9_\-]*", k.lower())
    }
    for name in FIRST_CLASS_FIELDS:  # written from the record's own columns: never twice
        extra.pop(name, None)
    return extra


def _extra_field_tex(
    paper: PaperRecord, name: str, value: str, source: dict[str, str]
) -> tuple[str, bool] | None:
    """``(tex, braced)`` for one extra field, or None to leave it out.

    Each kind of field has its own rule: a month becomes its macro (so styles can abbreviate it),
    URLs and identifiers are written verbatim, editors as a name list, page ranges with an en
    dash; a URL that only repeats the DOI is dropped, since styles would print it twice."""
    if name == "month" and (macro := _month(value)):
        return macro, False
    if name == "url" and paper.doi and normalize_doi(value) == paper.doi:
        return None  # only repeats the DOI (styles would print it twice)
    if name in VERBATIM_FIELDS:
        return clean_verbatim(value), True
    if name == "editor":
        return _names_tex([e.strip() for e in value.split(" and ") if e.strip()], source.get("editor")), True
    if name == "pages":
        return tex_escape(_PAGE_DASHES.sub("\u2013", " ".join(value.split()))), True
    return _text_tex(value, source.get(name)), True


def _entry_type(paper: PaperRecord) -> str:
    etype = (paper.entry_type or "").strip().lower()
    return etype if etype in ENTRY_TYPES else "misc"


def format_entry(
    paper: PaperRecord, key: str, include_abstract: bool = False, *, fields: str | Iterable[str] | None = None
) -> str:
    """The built entry for ``paper`` under ``key`` (fields one per line, two-space indent).

    ``fields``: a preset of :data:`FIELD_PRESETS` (default ``"standard"``) or the field names to
    keep; ``include_abstract`` adds the abstract to either.
    """
    lines = [f"  {name} = {value}" for name, value in _field_lines(paper, include_abstract, fields)]
    return f"@{_entry_type(paper)}{{{key},\n" + ",\n".join(lines) + "\n}\n"


def is_users_entry(paper: PaperRecord) -> bool:
    """Whether ``paper`` is an entry of the user's own library, to be inserted byte for byte.

    It is when it came from BibTeX text with a usable key and that text is not a web export (HTML
    entities or tags: a library that builds has none). A bulk export keyed by DOI -- the ACM
    Digital Library's -- never is; the caller may know better (``keep_original``).
    """
    original = (paper.bibtex or "").strip()
    return bool(original) and usable_key(original_key(original)) and not _WEB_RESIDUE.search(original)


def bibtex_entry(
    paper: PaperRecord,
    existing_keys: Set[str] = frozenset(),
    key_style: str = DEFAULT_STYLE,
    *,
    include_abstract: bool = False,
    fields: str | Iterable[str] | None = None,
    keep_original: bool | None = None,
) -> tuple[str, str]:
    """``(key, entry text)`` to insert into a user's ``.bib`` for ``paper``.

    The user's own entry (:func:`is_users_entry`, or ``keep_original=True`` when its key is usable)
    is returned unchanged (ending, like a built entry, in one newline) with its own key, even if
    that key is in ``existing_keys``: the caller decides whether it is the same entry. Otherwise an
    entry is built (:func:`format_entry`, ``fields`` and ``include_abstract`` choose its fields)
    under the source's own key when that is usable and free, else under a key in ``key_style``
    unique against ``existing_keys``.
    """
    key, keep = entry_key(paper, existing_keys, key_style, keep_original=keep_original)
    if keep:
        return key, (paper.bibtex or "").strip() + "\n"
    return key, format_entry(paper, key, include_abstract, fields=fields)


def entry_key(
    paper: PaperRecord,
    existing_keys: Set[str] = frozenset(),
    key_style: str = DEFAULT_STYLE,
    *,
    keep_original: bool | None = None,
) -> tuple[str, bool]:
    """The key :func:`bibtex_entry` would use, and whether it keeps the user's own entry.

    Without building the entry: a completion list keys twenty papers per keystroke and inserts
    at most one.
    """
    original = (paper.bibtex or "").strip()
    own_key = original_key(original) if original else ""
    keep = is_users_entry(paper) if keep_original is None else keep_original and usable_key(own_key)
    if keep:
        return own_key, True
    taken = folded(existing_keys)
    if usable_key(own_key) and own_key.lower() not in taken:
        return own_key, False
    return make_key(paper, taken, key_style), False
