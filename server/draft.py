"""Reading a draft: where its citations are, which of them still need a key, and what it is about.

This module is the pure core the language server calls on every keystroke. It knows nothing of
LSP or of the file system: it takes the document text (and, for ``\\input`` files, an injected
``read_file`` callable) and returns plain dataclasses. It is the facade the rest of the server
imports: the language-specific readers live in :mod:`citewise.server.latex` and
:mod:`citewise.server.markdown` (both implement :class:`~citewise.server.scan_model.Scanner`), the
data model they share in :mod:`citewise.server.scan_model` (re-exported here); this module holds
offset <-> LSP position conversion and the language-independent parts (dispatch, the one
per-document cache, the cursor look-up, the local-context window).

Imports go one way: ``draft -> latex -> latex_cite -> scan_model``, ``draft -> markdown ->
yaml_front`` (and ``markdown -> scan_model``, ``draft -> scan_model``); no reader imports this module.

Conventions (the LSP layer relies on them):

* Every offset is a 0-based index into the Python ``str`` (code points), half-open ``[start, end)``.
  :class:`LineIndex` converts to and from LSP ``(line, UTF-16 character)`` positions.
* For every key ``k`` of every citation, ``text[k.start:k.end] == k.key`` -- also for empty slots,
  whose range is empty.
* A replacement for a key slot is ``(start, end, before + new_key + after)``; ``before``/``after``
  are non-empty only where the syntax needs more than the bare key (``\\cite<>`` becomes
  ``\\cite{key}``, a Markdown slot without ``@`` gets one, a key inserted between keys gets a
  separator).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache

from citewise.models.query import OTHER_MARK, PLACEHOLDER_MARK, marked_query

from . import latex, markdown
from .scan_model import (
    LANGS,
    Citation,
    CiteKey,
    CursorCitation,
    Lang,
    Placeholder,
    ReadFile,
    Regions,
    Scanner,
    SlotEdit,
    citations_before,
    citations_near,
    citations_overlapping,
    cut_text,
    is_placeholder_token,
    normalize_space,
    prose,
)

__all__ = [
    "LANGS",
    "MAX_PLACEHOLDERS",
    "Citation",
    "CiteKey",
    "CursorCitation",
    "DocumentScan",
    "Lang",
    "LineIndex",
    "Placeholder",
    "ReadFile",
    "Regions",
    "Scanner",
    "SlotEdit",
    "bibliography_files",
    "citation_at",
    "citations_overlapping",
    "clear_cache",
    "cut_text",
    "document",
    "excluded_regions",
    "find_citations",
    "global_context",
    "is_placeholder_token",
    "language_for",
    "local_context",
    "marked_local_context",
    "normalize_space",
    "offset_to_position",
    "placeholders",
    "plain_text",
    "position_to_offset",
    "recent_keys",
    "scanner_for",
]

# --------------------------------------------------------------------------------------------
# Positions
# --------------------------------------------------------------------------------------------

_NEWLINE_RE = re.compile(r"\r\n|\r|\n")


class LineIndex:
    """Offset <-> LSP ``(line, UTF-16 character)`` conversion for one text.

    Build it once per document version and reuse it for many conversions: construction is one
    regex pass, each conversion a bisect plus work proportional to one line. Line breaks are
    ``\\n``, ``\\r\\n`` and ``\\r`` as in the LSP specification.
    """

    __slots__ = ("text", "_starts")

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts = [0, *(m.end() for m in _NEWLINE_RE.finditer(text))]

    @property
    def line_count(self) -> int:
        return len(self._starts)

    def line_start(self, line: int) -> int:
        line = min(max(line, 0), len(self._starts) - 1)
        return self._starts[line]

    def _line_end(self, line: int) -> int:
        """Offset of the line break ending ``line`` (or of the end of text)."""
        if line + 1 < len(self._starts):
            end = self._starts[line + 1]
            if self.text.startswith("\r\n", end - 2):
                return end - 2
            return end - 1
        return len(self.text)

    def position(self, offset: int) -> tuple[int, int]:
        """``(line, UTF-16 character)`` of an offset (clamped into the text)."""
        offset = min(max(offset, 0), len(self.text))
        line = bisect_right(self._starts, offset) - 1
        start = self._starts[line]
        offset = min(offset, self._line_end(line))  # inside a CRLF: end of the line
        seg = self.text[start:offset]
        if seg.isascii():
            return line, len(seg)
        return line, len(seg.encode("utf-16-le")) // 2

    def offset(self, line: int, character: int) -> int:
        """Offset of an LSP position; out-of-range lines/characters clamp as LSP asks."""
        if line < 0:
            return 0
        if line >= len(self._starts):
            return len(self.text)
        start = self._starts[line]
        end = self._line_end(line)
        character = max(character, 0)
        seg = self.text[start:end]
        if seg.isascii():
            return start + min(character, len(seg))
        units = seg.encode("utf-16-le")[: 2 * character]
        return start + len(units.decode("utf-16-le", errors="ignore"))


def offset_to_position(text: str, offset: int) -> tuple[int, int]:
    """One-off conversion; prefer :class:`LineIndex` for several."""
    return LineIndex(text).position(offset)


def position_to_offset(text: str, line: int, character: int) -> int:
    """One-off conversion; prefer :class:`LineIndex` for several."""
    return LineIndex(text).offset(line, character)


# --------------------------------------------------------------------------------------------
# Language dispatch
# --------------------------------------------------------------------------------------------

_LATEX_EXT = {".tex", ".ltx", ".latex", ".rnw", ".rtex", ".snw"}
_MARKDOWN_EXT = {".md", ".markdown", ".qmd", ".rmd", ".rmarkdown", ".pmd", ".mdown", ".mkd", ".mkdn"}
_LATEX_IDS = {"latex", "tex", "context", "rsweave", "latex-expl3", "doctex"}
_MARKDOWN_IDS = {"markdown", "quarto", "rmd", "rmarkdown", "pandoc", "pandoc-markdown", "mdx"}


def language_for(uri_or_path: str, language_id: str | None = None) -> Lang | None:
    """Which scanner reads this document, or ``None`` for files citewise ignores.

    The client's ``languageId`` wins when it is one we know (a user may have mapped an odd
    extension); otherwise the extension decides. ``.sty``/``.cls``/``.bib`` are deliberately not
    drafts: they define commands rather than cite papers.
    """
    lid = (language_id or "").strip().lower()
    if lid in _LATEX_IDS:
        return "latex"
    if lid in _MARKDOWN_IDS:
        return "markdown"
    path = uri_or_path.split("?", 1)[0].split("#", 1)[0]
    name = path.rstrip("/").rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    dot = name.rfind(".")
    ext = name[dot:].lower() if dot > 0 else ""
    if ext in _LATEX_EXT:
        return "latex"
    if ext in _MARKDOWN_EXT:
        return "markdown"
    return None


_SCANNERS: dict[str, Scanner] = {"latex": latex, "markdown": markdown}


def scanner_for(lang: str) -> Scanner:
    """The reader of a language: a module implementing :class:`Scanner`."""
    try:
        return _SCANNERS[lang]
    except KeyError:
        raise ValueError(f"unknown draft language {lang!r}; expected one of {LANGS}") from None


# --------------------------------------------------------------------------------------------
# The per-document cache (both languages)
# --------------------------------------------------------------------------------------------


class DocumentScan:
    """One document version as its scanner reads it: excluded regions, then citations on first use.

    Citations are scanned lazily because reading the title or the bibliography needs only the
    regions. Two threads may both scan the citations of a fresh entry; the scan is pure, so the
    second result merely replaces an equal first one.
    """

    __slots__ = ("scanner", "text", "regions", "_citations")

    def __init__(self, scanner: Scanner, text: str) -> None:
        self.scanner = scanner
        self.text = text
        self.regions = scanner.scan_regions(text)
        self._citations: tuple[Citation, ...] | None = None

    @property
    def citations(self) -> tuple[Citation, ...]:
        if self._citations is None:
            self._citations = self.scanner.scan_citations(self.text, self.regions)
        return self._citations


@lru_cache(maxsize=16)
def document(text: str, lang: Lang) -> DocumentScan:
    """The cached scan of a whole document: completion, diagnostics, hover and context ask for the
    same version on one keystroke, and each must not rescan it. The last few versions are kept,
    of either language. Fragments (a title, an included file) are scanned uncached by the readers
    so that they never evict the document."""
    return DocumentScan(scanner_for(lang), text)


def clear_cache() -> None:
    """Forget every cached document (benchmarks time cold scans)."""
    document.cache_clear()


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def find_citations(text: str, lang: Lang) -> list[Citation]:
    """Every citation marker in the draft, in document order.

    Commented-out LaTeX, verbatim, Markdown code and YAML front matter are skipped. Results are
    cached for the last few texts, so calling this and :func:`citation_at` on the same
    keystroke scans once.
    """
    return list(document(text, lang).citations)


def excluded_regions(text: str, lang: Lang) -> Regions:
    """The spans of the draft that are not prose (comments, verbatim, code, front matter), cached."""
    return document(text, lang).regions


def citation_at(text: str, offset: int, lang: Lang) -> CursorCitation | None:
    """The citation key slot the cursor is in, or ``None`` outside any key list.

    The cursor is in a key list between its opening delimiter and its closing one (inclusive of
    the position just before the closing one). Pre/post notes (``\\cite[see][p. 3]{...}``) are not
    key slots. Markdown also answers for a bare ``@`` just typed before the cursor.
    """
    offset = min(max(offset, 0), len(text))
    doc = document(text, lang)
    for cit in reversed(citations_before(doc.citations, offset)):
        found = doc.scanner.cursor_in(text, cit, offset)
        if found is not None:
            return found
    return doc.scanner.bare_cursor(text, offset, doc.regions)


def recent_keys(text: str, offset: int, lang: Lang, limit: int = 10, back: int = 200) -> list[str]:
    """Keys cited before ``offset``, the nearest first, each once (placeholders left out).

    What a key slot with no sentence around it is ranked by, after the draft's title and
    abstract: a paragraph cites the same few works again and again, so the keys just cited are
    the likeliest next ones. Only the last ``back`` citations are read, so a draft of thousands
    of citations costs no more than a short one.
    """
    out: list[str] = []
    for cit in reversed(citations_before(document(text, lang).citations, offset, back)):
        for k in reversed(cit.keys):
            if k.placeholder or k.key in out:
                continue
            out.append(k.key)
            if len(out) >= limit:
                return out
    return out


MAX_PLACEHOLDERS = 1000


def placeholders(text: str, lang: Lang, size: int = 200, limit: int = MAX_PLACEHOLDERS) -> list[Placeholder]:
    """Key slots still waiting for a citation, with their local contexts, the first ``limit``.

    A draft has tens; thousands are a pasted list or a hostile file, and each one costs a
    ranking and a diagnostic, so the rest are left for when the first ones are filled.
    """
    doc = document(text, lang)
    out: list[Placeholder] = []
    for cit in doc.citations:
        if len(out) >= limit:
            break
        if not cit.has_placeholder:
            continue
        # Past the first few hundred placeholders, no window widening: a draft made of
        # thousands of markers would otherwise cost seconds, and its contexts are empty anyway.
        widen = len(out) < _WIDEN_PLACEHOLDERS
        marked = _context_around(doc, cit.start, cit.end, size, widen)
        context = marked_query(marked).local
        for i, k in enumerate(cit.keys):
            if not k.placeholder:
                continue
            start, end, before, after = doc.scanner.slot_edit(text, cit, i)
            out.append(Placeholder(cit, i, start, end, k.key, context, before, after, marked))
    return out[:limit]


def local_context(text: str, offset: int, lang: Lang, size: int = 200) -> str:
    """About ``size`` characters of plain prose around ``offset``, the citation need's "query".

    Split 2/3 before and 1/3 after: the sentence being written precedes the cursor, and the
    text after it is often not written yet (unused budget on one side goes to the other). If
    ``offset`` is inside a citation marker, the whole marker is left out. Other citation
    markers, LaTeX commands (their prose arguments are kept), comments, Markdown code, YAML and
    markup are stripped; math is kept as its text. The ends are cut at word boundaries, so the
    result may be slightly shorter than ``size``.
    """
    return marked_query(marked_local_context(text, offset, lang, size)).local


def marked_local_context(text: str, offset: int, lang: Lang, size: int = 200) -> str:
    """:func:`local_context` with the placeholder's place (``offset``, or the citation marker it
    is in) written as ``PLACEHOLDER_MARK`` and every other citation marker as ``OTHER_MARK``:
    the text :func:`citewise.models.query.marked_query` turns into a position-aware query, so
    each placeholder of a sentence can weigh its own words (issue 16)."""
    doc = document(text, lang)
    offset = min(max(offset, 0), len(text))
    cut_start = cut_end = offset
    for cit in citations_near(doc.citations, offset):
        if cit.start <= offset <= cit.end:
            cut_start, cut_end = min(cut_start, cit.start), max(cut_end, cit.end)
    return _context_around(doc, cut_start, cut_end, size)


def global_context(text: str, lang: Lang, read_file: ReadFile | None = None) -> tuple[str, str]:
    """``(title, abstract)`` of the draft as plain text, ``""`` when absent.

    LaTeX follows ``\\input``/``\\include``/``\\subfile``/``\\import`` through ``read_file`` (each file
    at most once, so cycles end); Markdown reads the YAML front matter.
    """
    return scanner_for(lang).global_context(text, read_file, document(text, lang).regions)


def bibliography_files(text: str, lang: Lang, read_file: ReadFile | None = None) -> list[str]:
    """Bibliography files the draft declares, as written (``.bib`` added to ``\\bibliography``
    names), without duplicates; remote resources are skipped. Resolve them with
    :func:`citewise.server.bibfiles.resolve_bibliography`."""
    return scanner_for(lang).bibliography_files(text, read_file, document(text, lang).regions)


def plain_text(text: str, lang: Lang) -> str:
    """The whole draft as prose (citations, comments, code and commands stripped): the query of
    the whole-draft suggestions."""
    doc = document(text, lang)
    return prose(text, doc.citations, doc.regions, doc.scanner.to_plain)


# --------------------------------------------------------------------------------------------
# Local context window (language independent part)
# --------------------------------------------------------------------------------------------


def _plain_window(doc: DocumentScan, start: int, end: int) -> str:
    """The prose of ``[start, end)``: each citation leaves ``OTHER_MARK`` (its place matters to
    the placeholder's query), excluded regions such as comments leave nothing."""
    cuts = [(c.start, c.end) for c in citations_overlapping(doc.citations, start, end)]
    fill = {c: f" {OTHER_MARK} " for c in cuts}
    cuts.extend(doc.regions.overlapping(start, end))
    cuts.sort()
    return normalize_space(doc.scanner.to_plain(cut_text(doc.text, start, end, cuts, fill, _NO_MARKS)))


# A mark character already in the draft becomes a space: only the reader writes marks.
_NO_MARKS = {ord(PLACEHOLDER_MARK): " ", ord(OTHER_MARK): " "}


def _tail_words(s: str, n: int) -> str:
    if len(s) <= n:
        return s
    if n <= 0:
        return ""
    cut = len(s) - n
    if not s[cut - 1].isspace() and not s[cut].isspace():
        sp = s.find(" ", cut)
        if sp == -1:
            return ""
        cut = sp
    return s[cut:].strip()


def _head_words(s: str, n: int) -> str:
    if len(s) <= n:
        return s
    if n <= 0:
        return ""
    if not s[n].isspace() and not s[n - 1].isspace():
        sp = s.rfind(" ", 0, n)
        if sp == -1:
            return ""
        n = sp
    return s[:n].strip()


_WIDEN_PLACEHOLDERS = 200


def _context_around(doc: DocumentScan, cut_start: int, cut_end: int, size: int, widen: bool = True) -> str:
    """The marked local context (see :func:`marked_local_context`) around ``[cut_start, cut_end)``."""
    text = doc.text
    if size <= 0:
        return ""
    # Read a raw window a few times larger than needed (markup and cut markers shrink it); widen
    # it while cleaning left too little, up to a cap that bounds the cost on pathological text.
    raw = 4 * size
    cap = max(32 * size, 8192) if widen else raw
    while True:
        ws, we = max(0, cut_start - raw), min(len(text), cut_end + raw)
        before = _plain_window(doc, ws, cut_start)
        after = _plain_window(doc, cut_end, we)
        if ((len(before) > size or ws == 0) and (len(after) > size or we == len(text))) or raw >= cap:
            break
        raw = min(raw * 4, cap)
    before, after = _sentence_bounds(before, after)
    n_before = round(size * 2 / 3)
    n_after = size - n_before
    if len(after) < n_after:
        n_before = size - len(after)
    elif len(before) < n_before:
        n_after = size - len(before)
    # A cursor inside a word (no marker cut out) must not split that word in two.
    glue = "" if cut_start == cut_end and 0 < cut_start < len(text) and _in_word(text, cut_start) else " "
    glue = f"{glue}{PLACEHOLDER_MARK}{glue}"
    return normalize_space(f"{_tail_words(before, n_before)}{glue}{_head_words(after, n_after)}")


# A sentence ends at . ! ? (closing quotes/brackets allowed) before a capital, digit or opening mark.
_SENTENCE_END = re.compile(r"[.!?][\"”')\]]*\s+(?=[A-Z0-9\"“(\[])")
_SHORT_SENTENCE = 60  # a sentence shorter than this says too little alone


def _sentence_bounds(before: str, after: str) -> tuple[str, str]:
    """Keep the sentence the placeholder is in (plus the previous one when it is very short).

    Citing sentences are the evaluation's queries and the strongest signal of what to cite; a
    fixed window that runs into the next sentence or section heading mixes in another topic.
    """
    m = _SENTENCE_END.search(after)
    if m:
        after = after[: m.start() + 1]
    starts = [m.end() for m in _SENTENCE_END.finditer(before)]
    if starts:
        cut = starts[-1]
        if len(before) - cut + len(after) < _SHORT_SENTENCE:
            cut = starts[-2] if len(starts) > 1 else 0
        before = before[cut:]
    return before, after


def _in_word(text: str, offset: int) -> bool:
    return text[offset - 1].isalnum() and text[offset].isalnum()
