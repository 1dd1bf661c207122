"""Markdown scanner (Pandoc, Quarto, R Markdown): citations, code to skip, YAML front matter.

Pandoc's rules, in short: a bracketed citation is ``[prefix @key suffix; -@other]``; an in-text
citation is ``@key`` where the ``@`` does not follow a word character (so e-mail addresses are
not citations); a key starts with a letter, digit or ``_`` and may contain internal punctuation
``:.#$%&-+?<>~/``, or is written ``@{anything}``. Quarto cross-references (``@fig-x``,
``@sec-x``...) and pandoc-crossref ones (``@fig:x``) share the syntax but are not citations.

The module is the Markdown :class:`~citewise.server.scan_model.Scanner`: its public functions
are the protocol's. It imports the shared data model and its YAML reader
(:mod:`citewise.server.yaml_front`, re-exported), never the facade, which caches its results.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import defaultdict

from .scan_model import (
    Citation,
    CiteKey,
    CursorCitation,
    ReadFile,
    Regions,
    SlotEdit,
    is_placeholder_token,
    prose,
)
from .yaml_front import YamlValue, front_matter, front_matter_span, parse_front_matter

__all__ = [
    "YamlValue",
    "bare_cursor",
    "bibliography_files",
    "cursor_in",
    "front_matter",
    "front_matter_span",
    "global_context",
    "is_crossref",
    "parse_front_matter",
    "plain",
    "scan_citations",
    "scan_regions",
    "slot_edit",
    "to_plain",
]

_KEY = r"\w(?:\w|[:.#$%&\-+?<>~/](?=\w))*"
_KEY_RE = re.compile(_KEY)
# Characters after which an "@" does not start an in-text citation (mail, URLs, escapes, words).
_NOT_BEFORE_AT = r"\w@.:/=\\+&%#$\-"
# "@" first, so the regex engine can jump between "@"s; the look-behind then checks the char before.
_INTEXT_RE = re.compile(r"@(?<![" + _NOT_BEFORE_AT + r"]@)(?:\{([^{}\n]*)\}|(" + _KEY + r"))")
_BRACKET_RE = re.compile(r"\[([^\[\]]*)\]")
# One cited item inside brackets: "@" at the start of a word (or after "-" for author suppression).
_ITEM_RE = re.compile(r"(?<![^\s;\[])-?@(?:\{([^{}\n]*)\}|(" + _KEY + r")|(\?+))?")
_PARA_BREAK_RE = re.compile(r"\n[ \t]*\r?\n")
_CROSSREF_RE = re.compile(
    r"(?:fig|tbl|lst|sec|eq)[-:]|(?:thm|lem|cor|prp|cnj|def|exm|exr|sol|rem|alg|tip|nte|wrn|imp|cau)-"
)
_KEY_CHAR_RE = re.compile(r"[\w{]")
_NOT_BEFORE_AT_RE = re.compile(r"[" + _NOT_BEFORE_AT + r"]")


def is_crossref(key: str) -> bool:
    """Quarto / pandoc-crossref reference (``fig-x``, ``sec:intro``), not a bibliography key."""
    return _CROSSREF_RE.match(key) is not None


# --------------------------------------------------------------------------------------------
# Excluded regions: front matter, fenced code, code spans, HTML comments
# --------------------------------------------------------------------------------------------

_FENCE_RE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})(.*)$", re.MULTILINE)
_HTML_COMMENT_RE = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_BACKTICKS_RE = re.compile(r"`+")


def _fences(text: str, skip: Regions) -> list[tuple[int, int]]:
    if "```" not in text and "~~~" not in text:
        return []
    spans = []
    open_at = -1
    fence = ""
    for m in _FENCE_RE.finditer(text):
        marker, rest = m.group(1), m.group(2)
        if open_at < 0:
            if skip.contains(m.start()) or (marker[0] == "`" and "`" in rest):
                continue
            open_at, fence = m.start(), marker
        elif marker[0] == fence[0] and len(marker) >= len(fence) and not rest.strip():
            spans.append((open_at, m.end()))
            open_at = -1
    if open_at >= 0:
        spans.append((open_at, len(text)))
    return spans


def _code_spans(text: str, skip: Regions) -> list[tuple[int, int]]:
    """Inline code: a backtick run up to the next run of the same length in the same paragraph."""
    runs = [m.span() for m in _BACKTICKS_RE.finditer(text) if not skip.contains(m.start())]
    if len(runs) < 2:
        return []
    by_len: dict[int, list[int]] = defaultdict(list)
    for idx, (s, e) in enumerate(runs):
        by_len[e - s].append(idx)
    breaks = [m.start() for m in _PARA_BREAK_RE.finditer(text)]
    spans = []
    i = 0
    while i < len(runs):
        s, e = runs[i]
        same = by_len[e - s]
        j_pos = bisect_right(same, i)
        if j_pos < len(same):
            j = same[j_pos]
            cs, ce = runs[j]
            b = bisect_right(breaks, e - 1)
            if b >= len(breaks) or breaks[b] >= cs:
                spans.append((s, ce))
                i = j + 1
                continue
        i += 1
    return spans


def scan_regions(text: str) -> Regions:
    """Spans that are not prose: YAML front matter, fenced code, HTML comments, inline code."""
    spans: list[tuple[int, int]] = []
    fm = front_matter_span(text)
    if fm:
        spans.append((0, fm[2]))
    spans.extend(_fences(text, Regions(spans)))
    if "<!--" in text:
        spans.extend(m.span() for m in _HTML_COMMENT_RE.finditer(text))
    blocks = Regions(spans)
    if "`" in text:
        spans.extend(_code_spans(text, blocks))
    return Regions(spans)


# --------------------------------------------------------------------------------------------
# Citation finding
# --------------------------------------------------------------------------------------------


def _semicolon_segments(text: str, start: int, end: int) -> list[tuple[int, int]]:
    segs = []
    pos = start
    while True:
        semi = text.find(";", pos, end)
        if semi == -1:
            segs.append((pos, end))
            return segs
        segs.append((pos, semi))
        pos = semi + 1


def _bracket_citation(text: str, open_pos: int, close_pos: int, regions: Regions) -> Citation | None:
    if regions.contains(open_pos) or (open_pos and text[open_pos - 1] == "\\"):
        return None
    after = close_pos + 1
    if after < len(text) and text[after] == "(":
        return None  # a link [text](url)
    if after < len(text) and text[after] == ":" and (open_pos == 0 or text[open_pos - 1] == "\n"):
        return None  # a link reference definition
    if _PARA_BREAK_RE.search(text, open_pos, close_pos):
        return None
    keys: list[CiteKey] = []
    empty_slots: list[int] = []  # index in keys of whitespace-only segments
    cited = False
    for ss, se in _semicolon_segments(text, open_pos + 1, close_pos):
        found = False
        for m in _ITEM_RE.finditer(text, ss, se):
            if regions.contains(m.start()):
                continue
            braced, key, qmarks = m.group(1), m.group(2), m.group(3)
            if braced is not None:
                ks = m.start(1)
                k = CiteKey(braced, ks, ks + len(braced), is_placeholder_token(braced.strip()))
            elif key is not None:
                if is_crossref(key):
                    found = True
                    continue
                k = CiteKey(key, m.start(2), m.end(2), is_placeholder_token(key))
            elif qmarks is not None:
                k = CiteKey(qmarks, m.start(3), m.end(3), True)
            else:
                if text[m.end() : se].strip():
                    continue  # "@" followed by text: not a citation ("email @ work")
                k = CiteKey("", m.end(), m.end(), True)
            keys.append(k)
            found = cited = True
        if not found and not text[ss:se].strip():
            empty_slots.append(len(keys))
            keys.append(CiteKey("", se, se, True))
    if not cited:
        return None
    return Citation("markdown", "[@]", open_pos, close_pos + 1, tuple(keys), ((open_pos, close_pos + 1),))


def scan_citations(text: str, regions: Regions) -> tuple[Citation, ...]:
    """Bracketed and in-text citations outside ``regions`` (code, front matter), in order."""
    if "@" not in text:
        return ()
    brackets: list[Citation] = []
    if "[" in text:
        for m in _BRACKET_RE.finditer(text):
            if text.find("@", m.start(), m.end()) == -1:
                continue
            cit = _bracket_citation(text, m.start(), m.end() - 1, regions)
            if cit is not None:
                brackets.append(cit)
    starts = [c.start for c in brackets]
    intext: list[Citation] = []
    for m in _INTEXT_RE.finditer(text):
        at = m.start()
        if regions.contains(at):
            continue
        i = bisect_right(starts, at) - 1
        if i >= 0 and at < brackets[i].end:
            continue
        braced, key = m.group(1), m.group(2)
        if braced is not None:
            k = CiteKey(braced, m.start(1), m.end(1), is_placeholder_token(braced.strip()))
        else:
            if is_crossref(key):
                continue
            k = CiteKey(key, m.start(2), m.end(2), is_placeholder_token(key))
        intext.append(Citation("markdown", "@", at, m.end(), (k,), ()))
    if not intext:
        return tuple(brackets)
    if not brackets:
        return tuple(intext)
    return tuple(sorted(brackets + intext, key=lambda c: c.start))


# --------------------------------------------------------------------------------------------
# Cursor
# --------------------------------------------------------------------------------------------


def _after_at(text: str, k: CiteKey) -> bool:
    return text.startswith("@", k.start - 1) or text.startswith("@{", k.start - 2)


def slot_edit(text: str, cit: Citation, index: int) -> SlotEdit:
    """``(start, end, before, after)`` that fills key slot ``index`` (adds ``@`` where missing)."""
    k = cit.keys[index]
    if k.key or _after_at(text, k):
        return k.start, k.end, "", ""
    return k.start, k.end, (" @" if text[k.start - 1 : k.start] == ";" else "@"), ""


def _key_slot(text: str, cit: Citation, index: int, offset: int) -> CursorCitation:
    k = cit.keys[index]
    typed = text[k.start : offset]
    prefix = "" if k.placeholder else typed
    return CursorCitation(cit, offset, index, k.start, k.end, prefix, typed, k.placeholder)


def cursor_in(text: str, cit: Citation, offset: int) -> CursorCitation | None:
    """The key slot of ``cit`` at ``offset``; in an empty ``[; ]`` segment, a new ``@key`` goes there."""
    if not cit.groups:  # in-text
        k = cit.keys[0]
        return _key_slot(text, cit, 0, offset) if k.start <= offset <= k.end else None
    gs, ge = cit.groups[0]
    if not gs < offset < ge:
        return None
    for ss, se in _semicolon_segments(text, gs + 1, ge - 1):
        if not ss <= offset <= se:
            continue
        for i, k in enumerate(cit.keys):
            if not ss <= k.start <= se:
                continue
            if not k.key and not _after_at(text, k):  # whitespace-only segment: insert "@key" here
                before = " @" if text[offset - 1] == ";" else "@"
                return CursorCitation(cit, offset, i, offset, offset, "", "", True, before)
            if k.start <= offset <= k.end:
                return _key_slot(text, cit, i, offset)
        return None
    return None


def bare_cursor(text: str, offset: int, regions: Regions) -> CursorCitation | None:
    """``@`` just typed before the cursor (not yet a key): an empty in-text slot."""
    at = offset - 1
    if at < 0 or text[at] != "@" or regions.contains(at):
        return None
    if at > 0 and _NOT_BEFORE_AT_RE.match(text[at - 1]):
        return None
    if offset < len(text) and _KEY_CHAR_RE.match(text[offset]):
        return None
    cit = Citation("markdown", "@", at, offset, (CiteKey("", offset, offset, True),), (), False)
    return CursorCitation(cit, offset, 0, offset, offset, "", "", True)


# --------------------------------------------------------------------------------------------
# Plain text
# --------------------------------------------------------------------------------------------

# No pattern may scan past the next opening delimiter, so a run of "[" or "<" stays linear.
_MD_SUBS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"!\[([^\[\]\n]*)\]\([^()\n]*\)"), r" \1 "),  # image -> alt text
    (re.compile(r"\[([^\[\]\n]*)\]\([^()\n]*\)"), r" \1 "),  # link -> text
    (re.compile(r"\[([^\[\]\n]*)\]\[[^\[\]\n]*\]"), r" \1 "),  # reference link -> text
    (re.compile(r"\[\^[^\[\]\n]*\]"), " "),  # footnote reference
    (re.compile(r"\^\["), " "),  # inline footnote: keep its text
    (re.compile(r"<(?:https?|ftp|mailto):[^<>\s]*>"), " "),  # autolink
    (re.compile(r"</?[A-Za-z][^<>\n]*>"), " "),  # HTML tag
    (re.compile(r"\{[#.=][^{}\n]*\}"), " "),  # Pandoc attributes {#sec-x .unnumbered}
    (re.compile(r"^[ \t]*(?:[-*_][ \t]*){3,}$|^[ \t]*:::+.*$", re.MULTILINE), " "),  # rules, divs
    (re.compile(r"^[ \t]*(?:>[ \t]?)*(?:#{1,6}[ \t]+|(?:[-*+]|\d+[.)])[ \t]+)?", re.MULTILINE), " "),
    (re.compile(r"@(?<![" + _NOT_BEFORE_AT + r"]@)(?:" + _CROSSREF_RE.pattern + r")[\w:.-]*"), " "),
    (re.compile(r"\\[A-Za-z]+\*?"), " "),  # raw LaTeX / math commands
    (re.compile(r"\\([!-/:-@\[-`{-~])"), r"\1"),  # backslash escapes
]
# Emphasis, math and table markup: single characters, removed with one translate() (an escaped
# "\*" is lost too, which does not matter for a retrieval query).
_MARKUP_TABLE = str.maketrans(dict.fromkeys("*~$[]|{}\\", " "))
_UNDERSCORE_RE = re.compile(r"_+")


def _underscore(m: re.Match[str]) -> str:
    s, e, t = m.start(), m.end(), m.string
    inside_word = s > 0 and e < len(t) and t[s - 1].isalnum() and t[e].isalnum()
    return m.group() if inside_word else " "


def to_plain(fragment: str) -> str:
    """Markdown (code and citations already cut) to prose: links keep their text, markup goes."""
    for pattern, repl in _MD_SUBS:
        fragment = pattern.sub(repl, fragment)
    fragment = fragment.translate(_MARKUP_TABLE)
    if "_" in fragment:
        fragment = _UNDERSCORE_RE.sub(_underscore, fragment)
    return fragment


def plain(fragment: str) -> str:
    """A self-contained fragment (a title, an abstract) to normalised prose."""
    regions = scan_regions(fragment)  # uncached: fragments must not evict the document's entries
    return prose(fragment, scan_citations(fragment, regions), regions, to_plain)


# --------------------------------------------------------------------------------------------
# Title, abstract, bibliography
# --------------------------------------------------------------------------------------------

# Heading text runs to the end of the line; the closing ``#`` run is stripped in
# :func:`_heading_text` (a lazy group before ``[ \t#]*$`` is quadratic on long runs of them).
_ATX_RE = re.compile(r"^[ ]{0,3}(#{1,6})[ \t]+(.*)$", re.MULTILINE)
_ABSTRACT_HEADING_RE = re.compile(r"abstract\b", re.IGNORECASE)


def _heading_text(m: re.Match[str]) -> str:
    """An ATX heading's text without its closing sequence of blanks and ``#``."""
    return m.group(2).rstrip(" \t#")


def _as_text(value: YamlValue) -> str | None:
    if isinstance(value, list):
        return " ".join(value)
    return value


def global_context(
    text: str, read_file: ReadFile | None = None, regions: Regions | None = None
) -> tuple[str, str]:
    """Title and abstract from the YAML front matter.

    Fallbacks, for drafts without metadata: a Pandoc title block (``% Title`` on the first
    line) or a ``# Title`` heading that opens the document; an ``# Abstract`` section.
    ``read_file`` is unused (Markdown has no standard include) and accepted for symmetry;
    ``regions`` are ``text``'s own (scanned when ``None``).
    """
    meta = front_matter(text)
    title = _as_text(meta.get("title"))
    abstract = _as_text(meta.get("abstract"))
    span = front_matter_span(text)
    body_start = span[2] if span else 0
    if regions is None:
        regions = scan_regions(text)
    if title is None:
        first = text[body_start:].lstrip()
        if first.startswith("% "):
            title = first[2:].split("\n", 1)[0]
        else:
            m = _ATX_RE.match(first)
            if m and len(m.group(1)) == 1:
                title = _heading_text(m)
    if abstract is None:
        for m in _ATX_RE.finditer(text, body_start):
            if regions.contains(m.start()) or not _ABSTRACT_HEADING_RE.match(m.group(2)):
                continue
            level = len(m.group(1))
            end = len(text)
            for nxt in _ATX_RE.finditer(text, m.end()):
                if len(nxt.group(1)) <= level and not regions.contains(nxt.start()):
                    end = nxt.start()
                    break
            abstract = text[m.end() : end]
            break
    return plain(title or ""), plain(abstract or "")


def bibliography_files(
    text: str, read_file: ReadFile | None = None, regions: Regions | None = None
) -> list[str]:
    """``bibliography:`` of the front matter (a scalar or a list), remote URLs skipped.

    ``read_file`` and ``regions`` are unused (the front matter is read directly) and accepted
    for the :class:`~citewise.server.scan_model.Scanner` protocol.
    """
    value = front_matter(text).get("bibliography")
    names = [value] if isinstance(value, str) else (value or [])
    out: list[str] = []
    for name in names:
        name = name.strip()
        if name and "://" not in name and name not in out:
            out.append(name)
    return out
