"""Reading a draft: where its citations are, which of them still need a key, and what it is about.

This module is the pure core the language server calls on every keystroke. It knows nothing of
LSP or of the file system: it takes the document text (and, for ``\\input`` files, an injected
``read_file`` callable) and returns plain dataclasses. The language-specific scanners live in
:mod:`citewise.server.latex` and :mod:`citewise.server.markdown`; this module holds the shared
data model, offset <-> LSP position conversion and the language-independent parts (dispatch,
the local-context window).

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

import bisect
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

Lang = Literal["latex", "markdown"]
LANGS: tuple[Lang, ...] = ("latex", "markdown")

ReadFile = Callable[[str], "str | None"]
"""``read_file(name)``: text of a file named relative to the main document, or ``None`` if unreadable."""

# --------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CiteKey:
    """One key slot of a citation.

    ``key`` is the key exactly as written (surrounding whitespace excluded) and ``""`` for an
    empty slot, so ``text[start:end] == key`` always holds.
    """

    key: str
    start: int
    end: int
    placeholder: bool  # empty, ``?``, ``TODO``... -- a citation still to be chosen


@dataclass(frozen=True, slots=True)
class Citation:
    """One citation marker in the draft.

    ``command`` is the LaTeX command as written including the backslash and star (``\\citep*``),
    ``\\cite<>`` for the to-do marker, ``[@]`` for a Pandoc bracketed citation and ``@`` for a
    Pandoc in-text citation. ``start``/``end`` cover the whole marker (command, optional
    arguments, all key groups). ``groups`` are the ``[start, end)`` ranges of the key lists
    including their delimiters (``{...}``, ``[...]``, ``<...>``); ``\\cites`` has several. An
    in-text Markdown citation has no delimiters, hence no groups. ``closed`` is False while the
    user is still typing (``\\cite{smi`` with no ``}``); the last group then ends where the key
    list stops.
    """

    lang: Lang
    command: str
    start: int
    end: int
    keys: tuple[CiteKey, ...]
    groups: tuple[tuple[int, int], ...]
    closed: bool = True

    @property
    def has_placeholder(self) -> bool:
        return any(k.placeholder for k in self.keys)

    @property
    def is_todo_marker(self) -> bool:
        """``\\cite<>``: a to-do marker whose whole text is replaced by a real citation."""
        return self.command.endswith("<>")


@dataclass(frozen=True, slots=True)
class CursorCitation:
    """The key slot under the cursor, and how to put a chosen key there.

    ``start``/``end`` is the range a completion replaces; it contains ``offset`` and never spans
    a line break (LSP requires both). The insert range for an ``InsertReplaceEdit`` is
    ``[start, offset)``. ``key_index`` points into ``citation.keys``; it is ``None`` when the
    cursor sits in whitespace next to a key, where a *new* key is inserted (with a separator in
    ``before``/``after``). ``prefix`` is the partially typed key (``""`` for empty slots and
    placeholder tokens, which are not the start of a key); ``typed`` is the literal document text
    in ``[start, offset)``, which a client fuzzy-matches against -- see :meth:`filter_text`.
    """

    citation: Citation
    offset: int
    key_index: int | None
    start: int
    end: int
    prefix: str
    typed: str
    placeholder: bool
    before: str = ""
    after: str = ""

    def replacement(self, key: str) -> str:
        """Text that replaces ``[start, end)`` to cite ``key`` here."""
        return f"{self.before}{key}{self.after}"

    def filter_text(self, key: str) -> str:
        """A ``filterText`` under which the client will not hide the item.

        Clients filter by the text between ``start`` and the cursor. For a normal slot that is
        the typed prefix of the key itself; for ``?``/``TODO`` or ``\\cite<`` it is not, so the
        typed text is prepended.
        """
        return key if self.typed == self.prefix else self.typed + key

    @property
    def key(self) -> CiteKey | None:
        return None if self.key_index is None else self.citation.keys[self.key_index]


@dataclass(frozen=True, slots=True)
class Placeholder:
    """A key slot that still needs a citation, with the text a recommender should read.

    ``start``/``end``/``before``/``after`` form the edit that fills it (see
    :meth:`replacement`); for diagnostics use the whole marker, ``citation.start/end``, since an
    empty slot has an empty range. ``context`` is :func:`local_context` of the marker.
    """

    citation: Citation
    key_index: int
    start: int
    end: int
    token: str  # the placeholder as written: "", "?", "TODO", ...
    context: str
    before: str = ""
    after: str = ""

    def replacement(self, key: str) -> str:
        return f"{self.before}{key}{self.after}"


# --------------------------------------------------------------------------------------------
# Placeholder tokens
# --------------------------------------------------------------------------------------------

_PLACEHOLDER_RE = re.compile(r"(?:\?+|\.{2,}|…|todo|xxx+|tbd|fixme)", re.IGNORECASE)


def is_placeholder_token(key: str) -> bool:
    """Whether a key as written means "a citation goes here" rather than naming an entry.

    Empty, ``?``/``??``, ``...``, ``TODO``, ``XXX``, ``TBD``, ``FIXME`` (any case). Real BibTeX
    keys never look like these, so flagging them cannot hide a real citation.
    """
    return not key or _PLACEHOLDER_RE.fullmatch(key) is not None


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
# Regions the scanners skip (comments, code, verbatim)
# --------------------------------------------------------------------------------------------


class Regions:
    """Sorted, merged half-open spans that the scanners must ignore.

    Built once per text (comments, verbatim, code blocks...) so that membership is a bisect
    instead of a rescan of the line, keeping citation finding linear in the document size.
    """

    __slots__ = ("starts", "ends")

    def __init__(self, spans: Iterable[tuple[int, int]] = ()) -> None:
        starts: list[int] = []
        ends: list[int] = []
        for s, e in sorted(spans):
            if e <= s:
                continue
            if ends and s <= ends[-1]:
                ends[-1] = max(ends[-1], e)
            else:
                starts.append(s)
                ends.append(e)
        self.starts = starts
        self.ends = ends

    def __len__(self) -> int:
        return len(self.starts)

    def contains(self, pos: int) -> bool:
        i = bisect_right(self.starts, pos) - 1
        return i >= 0 and pos < self.ends[i]

    def overlapping(self, start: int, end: int) -> list[tuple[int, int]]:
        """Spans intersecting ``[start, end)``, in order."""
        i = max(bisect_right(self.starts, start) - 1, 0)
        out = []
        while i < len(self.starts) and self.starts[i] < end:
            if self.ends[i] > start:
                out.append((self.starts[i], self.ends[i]))
            i += 1
        return out


def cut_text(text: str, start: int, end: int, cuts: Sequence[tuple[int, int]]) -> str:
    """``text[start:end]`` with the (sorted) ``cuts`` removed, each replaced by one space."""
    pieces = []
    pos = start
    for s, e in cuts:
        if e <= pos or s >= end:
            continue
        if s > pos:
            pieces.append(text[pos:s])
        pieces.append(" ")
        pos = max(pos, e)
    if pos < end:
        pieces.append(text[pos:end])
    return "".join(pieces)


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


def _scanner(lang: str) -> ModuleType:
    # Imported lazily: the scanners import the data model from this module.
    if lang == "latex":
        from . import latex

        return latex
    if lang == "markdown":
        from . import markdown

        return markdown
    raise ValueError(f"unknown draft language {lang!r}; expected one of {LANGS}")


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def find_citations(text: str, lang: Lang) -> list[Citation]:
    """Every citation marker in the draft, in document order.

    Commented-out LaTeX, verbatim, Markdown code and YAML front matter are skipped. Results are
    cached for the last few texts, so calling this and :func:`citation_at` on the same
    keystroke scans once.
    """
    return list(_scanner(lang).find_citations(text))


def citation_at(text: str, offset: int, lang: Lang) -> CursorCitation | None:
    """The citation key slot the cursor is in, or ``None`` outside any key list.

    The cursor is in a key list between its opening delimiter and its closing one (inclusive of
    the position just before the closing one). Pre/post notes (``\\cite[see][p. 3]{...}``) are not
    key slots. Markdown also answers for a bare ``@`` just typed before the cursor.
    """
    offset = min(max(offset, 0), len(text))
    return _scanner(lang).citation_at(text, offset)


MAX_PLACEHOLDERS = 1000


def placeholders(text: str, lang: Lang, size: int = 200, limit: int = MAX_PLACEHOLDERS) -> list[Placeholder]:
    """Key slots still waiting for a citation, with their local contexts, the first ``limit``.

    A draft has tens; thousands are a pasted list or a hostile file, and each one costs a
    ranking and a diagnostic, so the rest are left for when the first ones are filled.
    """
    mod = _scanner(lang)
    out: list[Placeholder] = []
    for cit in mod.find_citations(text):
        if len(out) >= limit:
            break
        if not cit.has_placeholder:
            continue
        # Past the first few hundred placeholders, no window widening: a draft made of
        # thousands of markers would otherwise cost seconds, and its contexts are empty anyway.
        widen = len(out) < _WIDEN_PLACEHOLDERS
        context = _context_around(text, mod, cit.start, cit.end, size, widen)
        for i, k in enumerate(cit.keys):
            if not k.placeholder:
                continue
            start, end, before, after = mod.slot_edit(text, cit, i)
            out.append(Placeholder(cit, i, start, end, k.key, context, before, after))
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
    mod = _scanner(lang)
    offset = min(max(offset, 0), len(text))
    cut_start = cut_end = offset
    for cit in _citations_near(mod.find_citations(text), offset):
        if cit.start <= offset <= cit.end:
            cut_start, cut_end = min(cut_start, cit.start), max(cut_end, cit.end)
    return _context_around(text, mod, cut_start, cut_end, size)


def global_context(text: str, lang: Lang, read_file: ReadFile | None = None) -> tuple[str, str]:
    """``(title, abstract)`` of the draft as plain text, ``""`` when absent.

    LaTeX follows ``\\input``/``\\include``/``\\subfile``/``\\import`` through ``read_file`` (each file
    at most once, so cycles end); Markdown reads the YAML front matter.
    """
    return _scanner(lang).global_context(text, read_file)


def bibliography_files(text: str, lang: Lang, read_file: ReadFile | None = None) -> list[str]:
    """Bibliography files the draft declares, as written (``.bib`` added to ``\\bibliography``
    names), without duplicates; remote resources are skipped. Resolve them with
    :func:`citewise.server.bibfiles.resolve_bibliography`."""
    return _scanner(lang).bibliography_files(text, read_file)


# --------------------------------------------------------------------------------------------
# Local context window (language independent part)
# --------------------------------------------------------------------------------------------


def _start(cit: Citation) -> int:
    return cit.start


def _citations_near(cits: Sequence[Citation], offset: int, back: int = 4) -> Sequence[Citation]:
    """The few citations that can contain ``offset`` (sorted by start; a handful may nest)."""
    lo = bisect.bisect_right(cits, offset, key=_start)
    return cits[max(0, lo - back) : lo]


def citations_overlapping(cits: Sequence[Citation], start: int, end: int) -> list[Citation]:
    """Citations (sorted by start) that intersect ``[start, end)`` -- a bisect, not a scan."""
    lo = bisect.bisect_left(cits, start, key=_start)
    out = [c for c in cits[max(0, lo - 4) : lo] if c.end > start]
    hi = bisect.bisect_left(cits, end, lo=lo, key=_start)  # not cits[lo:]: a copy of the tail
    out.extend(cits[lo:hi])
    return out


_SPACE_PUNCT_RE = re.compile(r" ([,.;:!?)\]])")
_OPEN_SPACE_RE = re.compile(r"([(\[]) ")


def normalize_space(s: str) -> str:
    """Collapse whitespace and the gaps left where markers were cut (``"by , we"`` -> ``"by, we"``)."""
    s = " ".join(s.split())
    s = _SPACE_PUNCT_RE.sub(r"\1", s)
    return _OPEN_SPACE_RE.sub(r"\1", s)


def _plain_window(text: str, mod: ModuleType, start: int, end: int) -> str:
    cuts = [(c.start, c.end) for c in citations_overlapping(mod.find_citations(text), start, end)]
    cuts.extend(mod.excluded_regions(text).overlapping(start, end))
    cuts.sort()
    return normalize_space(mod.to_plain(cut_text(text, start, end, cuts)))


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


def _context_around(
    text: str, mod: ModuleType, cut_start: int, cut_end: int, size: int, widen: bool = True
) -> str:
    if size <= 0:
        return ""
    # Read a raw window a few times larger than needed (markup and cut markers shrink it); widen
    # it while cleaning left too little, up to a cap that bounds the cost on pathological text.
    raw = 4 * size
    cap = max(32 * size, 8192) if widen else raw
    while True:
        ws, we = max(0, cut_start - raw), min(len(text), cut_end + raw)
        before = _plain_window(text, mod, ws, cut_start)
        after = _plain_window(text, mod, cut_end, we)
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
