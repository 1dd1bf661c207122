"""BibTeX importer: ``.bib`` files (or folders of them) to clean :class:`PaperRecord` objects.

Parsing is bibtexparser v2, one file at a time (memory bounded by the largest file, not the
collection). Each entry keeps its original text (``bibtex``) so the writer can hand users back
exactly what their library said, including Better BibTeX keys. A broken entry becomes an
:class:`ImportProblem` with file and line; the rest of the file still imports.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import bibtexparser
from bibtexparser.model import DuplicateBlockKeyBlock, Entry

from .records import ImportProblem, PaperRecord, doi_or_empty
from .texclean import tex_to_unicode

MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
}

# Fields kept in ``extra`` (everything else is either a first-class column or noise for search).
EXTRA_FIELDS = (
    "pages",
    "publisher",
    "address",
    "series",
    "volume",
    "number",
    "isbn",
    "issn",
    "url",
    "month",
    "location",
    "edition",
    "editor",
    "note",
    "numpages",
    "howpublished",
    "institution",
    "school",
    "organization",
    "eprint",
    "archiveprefix",
    "primaryclass",
    "articleno",
)

# The lookbehind starts a match only where a run of whitespace starts: a plain ``\s+and\s+``
# scanned over a long run of spaces retries at every space (quadratic).
_AND_RE = re.compile(r"(?<!\s)\s+and\s+", re.I)
# Bounded runs: with ``[a-z\-]+`` a text of 20,000 "arxiv" took quadratic time (every occurrence
# scanned all the letters after it); archive names are short ("cond-mat", "hep-th").
_ARXIV_IN_TEXT = re.compile(r"arxiv[:\s./]{0,16}(?:abs/)?(\d{4}\.\d{4,5}|[a-z\-]{1,24}/\d{7})", re.I)
_YEAR_RE = re.compile(r"\d{4}")
_DOI_KEY_RE = re.compile(r"^10\.\d{4,9}/\S+$")

# bibtexparser logs every failed block itself; we report them our way (file:line) instead.
logging.getLogger("bibtexparser").setLevel(logging.CRITICAL)


def split_authors(value: str) -> list[str]:
    """Split a BibTeX name list on top-level ``and`` (not inside braces) and clean each name."""
    names: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0 and ch.isspace():
            m = _AND_RE.match(value, i)
            if m:
                names.append(value[start:i])
                start = i = m.end()
                continue
            # No "and" after this run of spaces: trying again inside the run would fail the same
            # way, once per space (quadratic on a long run), so skip the run.
            while i < len(value) and value[i].isspace():
                i += 1
            continue
        i += 1
    names.append(value[start:])
    return [n for n in (tex_to_unicode(x) for x in names) if n]


# Why a session record is skipped, in the import summary's words (counted by it).
SESSION_SKIP = 'session records (ACM "Session details"), not papers'


def is_session_record(title: str, abstract: str) -> bool:
    """ACM exports list conference sessions as entries ("Session Details: ..."): not papers."""
    return not abstract and title.lower().startswith("session details")


def _doi_field(value: str) -> str:
    r"""The DOI of a ``doi`` field (``{{10.1145/x}}`` and ``\_`` included), or "" when it is not one.

    A value such as ``{}`` or ``n/a`` must not become an identifier: the store merges records
    that share a DOI, so two unrelated entries would collapse into one paper."""
    return doi_or_empty(value.replace("{", "").replace("}", "").replace("\\_", "_"))


def entry_to_record(entry: Entry, source: str) -> PaperRecord | ImportProblem:
    """One parsed BibTeX entry to a record (or a problem with its line)."""
    line = (entry.start_line or 0) + 1
    fields = {
        k.lower(): (v.value if isinstance(v.value, str) else str(v.value))
        for k, v in entry.fields_dict.items()
    }
    # BibTeX and biber accept an entry without a title (@misc, @online, a hand-written @book);
    # it is still the user's to cite: imported under its key as the displayed title, so that
    # `citewise search KEY`, hover and "Add missing BibTeX entry" find it. Its text is kept as
    # written, so what goes back into a .bib is the entry itself, with no made-up title.
    title = tex_to_unicode(fields.get("title", "")) or entry.key
    abstract = tex_to_unicode(fields.get("abstract", ""))
    if is_session_record(title, abstract):
        return ImportProblem(
            source, line, f"'{entry.key}' is a session record, not a paper", skipped=True, reason=SESSION_SKIP
        )
    year_match = _YEAR_RE.search(fields.get("year", "") or fields.get("date", ""))
    etype = entry.entry_type.lower()
    venue = fields.get("booktitle") or fields.get("journal") or fields.get("journaltitle") or ""
    if not venue and etype in ("phdthesis", "mastersthesis"):
        venue = fields.get("school", "")
    arxiv = ""
    if fields.get("archiveprefix", "").lower() == "arxiv" or fields.get("eprinttype", "").lower() == "arxiv":
        arxiv = fields.get("eprint", "")
    if not arxiv:
        m = _ARXIV_IN_TEXT.search(
            " ".join((fields.get("journal", ""), fields.get("url", ""), fields.get("note", "")))
        )
        if m:
            arxiv = m.group(1)
    extra = {k: tex_to_unicode(fields[k]) for k in EXTRA_FIELDS if fields.get(k)}
    month = fields.get("month", "").strip().lower()[:3]
    if month in MONTHS:
        extra["month"] = str(MONTHS[month])
    return PaperRecord(
        title=title,
        abstract=abstract,
        authors=split_authors(fields.get("author", "")),
        year=int(year_match.group(0)) if year_match else None,
        venue=tex_to_unicode(venue),
        entry_type=etype,
        keywords=tex_to_unicode(fields.get("keywords", "")),
        key=entry.key,
        # ACM's export keys entries by DOI, and the key is right where the doi field is missing or
        # wrong (cikm-2018 has an entry whose doi field repeats its neighbour's): a DOI key wins.
        doi=entry.key if _DOI_KEY_RE.match(entry.key) else _doi_field(fields.get("doi", "")),
        arxiv=arxiv,
        bibtex=(entry.raw or "").strip(),
        source=source,
        source_line=line,
        extra=extra,
    )


def iter_bibtex_text(text: str, source: str) -> Iterator[PaperRecord | ImportProblem]:
    """Records from BibTeX text (``source`` names it in messages).

    Nothing escapes as an exception: whatever the parser or the cleaning trips over in one entry
    becomes a problem with that entry's line, and the other entries still import."""
    try:
        library = bibtexparser.parse_string(text)
    except Exception as exc:  # the parser's own bugs on hostile input: report, never crash an import
        yield ImportProblem(source, 1, f"could not parse the file ({type(exc).__name__}: {exc})")
        return
    for entry in library.entries:
        yield _safe_record(entry, source)
    for block in library.failed_blocks:
        line = (block.start_line or 0) + 1
        if isinstance(block, DuplicateBlockKeyBlock):
            # Same key twice: import it anyway, the store merges true duplicates by DOI/title.
            dup = block.ignore_error_block
            if isinstance(dup, Entry):
                # The parser's middlewares never ran on the duplicate (its values keep their
                # enclosing braces, so "A and B" stayed one author): parse its text alone.
                again = bibtexparser.parse_string(dup.raw).entries if dup.raw else []
                rec = _safe_record(again[0] if again else dup, source)
                if isinstance(rec, PaperRecord):
                    rec.source_line = (dup.start_line or 0) + 1
                yield rec
                continue
        error = getattr(block, "error", None)
        reason = str(error) if error and str(error) else "syntax error (unbalanced braces or missing comma?)"
        snippet = (block.raw or "").strip().splitlines()[0][:60] if block.raw else ""
        yield ImportProblem(source, line, f"broken entry {snippet!r}: {reason}")


def _safe_record(entry: Entry, source: str) -> PaperRecord | ImportProblem:
    try:
        return entry_to_record(entry, source)
    except Exception as exc:  # a field shape nobody foresaw: this entry is broken, not the import
        line = (getattr(entry, "start_line", 0) or 0) + 1
        return ImportProblem(
            source,
            line,
            f"entry '{getattr(entry, 'key', '?')}' could not be read ({type(exc).__name__}: {exc})",
        )


_NOT_TEXT = bytes(b for b in range(256) if b < 9 or 13 < b < 32 or b == 127)


def looks_binary(data: bytes) -> bool:
    """More than 5 % control bytes in the first 8 KB: not a text file at all (random or compressed
    data has about 11 %; a .bib with one stray NUL is still text, and imports)."""
    head = data[:8192]
    controls = len(head) - len(head.translate(None, _NOT_TEXT))
    return controls * 20 > len(head)


def iter_bibtex(path: str | Path) -> Iterator[PaperRecord | ImportProblem]:
    """Records from one ``.bib`` file (UTF-8, else Latin-1; a binary file is one problem)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        yield ImportProblem(str(path), 0, f"cannot read: {exc.strerror or exc}")
        return
    if looks_binary(data):
        yield ImportProblem(str(path), 1, "a binary file, not BibTeX text; check that this is the right file")
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    yield from iter_bibtex_text(text.removeprefix("\ufeff"), str(path))
