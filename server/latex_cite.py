"""LaTeX citation commands: where they are, what they cite, which key slot the cursor is in.

The scanning half of the LaTeX reader (:mod:`citewise.server.latex` adds prose, title, abstract
and bibliographies, and is the :class:`~citewise.server.scan_model.Scanner`). Why a hand-written
scanner rather than a LaTeX parser: it runs on every keystroke, on drafts that are half-typed and
therefore rarely parse. One precompiled regex finds the command names; a few bounded steps per
hit read the arguments. Everything is linear in the text size.
"""

from __future__ import annotations

import re

from citewise.indexer.braces import BraceIndex

from .scan_model import (
    Citation,
    CiteKey,
    CursorCitation,
    Regions,
    SlotEdit,
    citation_start,
    is_placeholder_token,
)

# --------------------------------------------------------------------------------------------
# Command table
# --------------------------------------------------------------------------------------------

_SINGLE = """
cite citep citet citealp citealt citeauthor citefullauthor citeyear citeyearpar citenum citeNP
parencite textcite autocite footcite footcitetext smartcite supercite nocite fullcite footfullcite
citetitle citeurl citedate citeA citeauthorNP citeyearNP shortcite shortciteA shortciteNP
shortciteauthor fullciteA fullciteNP fullciteauthor citen citeonline bibentry
notecite pnotecite fnotecite
""".split()
_MULTI = """
cites parencites textcites autocites footcites footcitetexts smartcites supercites
""".split()
# biblatex's \volcite family: ``\volcite[prenote]{volume}[pages]{key}``, and the multicite forms
# ``\volcites(..)(..)[prenote]{volume}[pages]{key}...``.
_VOLUME = "volcite pvolcite fvolcite ftvolcite svolcite tvolcite avolcite".split()


def _with_capitals(names: list[str]) -> frozenset[str]:
    return frozenset(names) | frozenset(n[0].upper() + n[1:] for n in names)


VOLUME_COMMANDS: frozenset[str] = _with_capitals(_VOLUME) | _with_capitals([n + "s" for n in _VOLUME])
"""The ``\\volcite`` family: a ``{volume}`` argument (and optional ``[pages]``) before each key list."""

MULTICITE_COMMANDS: frozenset[str] = _with_capitals(_MULTI) | _with_capitals([n + "s" for n in _VOLUME])
"""biblatex multicite commands: ``(pre)(post)`` global notes, then repeated ``[pre][post]{keys}``."""

CITE_COMMANDS: frozenset[str] = _with_capitals(_SINGLE) | MULTICITE_COMMANDS | VOLUME_COMMANDS
"""Command names (without backslash) whose brace argument is a list of citation keys.

Capitalised forms (``\\Citep``, ``\\Textcite``, ``\\Notecite``...) are included for every name; a
capitalised form that no package defines costs nothing. They hold texlab's 56 default citation
commands but one (``tests/lsp/test_lsp_completion_texlab.py``): natbib's ``\\citetext`` takes free text
(``\\citetext{priv.\\ comm.}``), and reading it as keys would flag its words as missing keys. The
``\\volcite`` family's first brace argument is a volume, not a key: its key list is the brace group
after ``{volume}[pages]``.
"""

# A backslash, then a letter run containing "cite" (or \bibentry); the name is then checked
# against the table. Matching the generic shape keeps the regex small and fast.
_CMD_RE = re.compile(r"\\([A-Za-z]*[cC]ite[A-Za-z]*|bibentry)(?![A-Za-z@])(\*?)")

# Whitespace between arguments: spaces and at most one line break (a blank line ends a paragraph).
_ARG_WS_RE = re.compile(r"[ \t]*(?:\r?\n[ \t]*)?")
# A closed key list: no braces, backslashes or paragraph breaks; % comments allowed.
# Each alternative starts with a different character and the repetition is possessive, so a
# failing match (an unclosed "\cite{" before a long paragraph) costs one pass, not 2^n.
_CLOSED_GROUP_RE = re.compile(r"\{((?:[^{}\\%\n]++|%[^\n]*+\n|\n(?![ \t]*\r?\n))*+)\}")
# An unclosed key list being typed: keys without spaces, separated by commas, on one line.
_OPEN_GROUP_RE = re.compile(r"\{[ \t]*[^\s,{}\\%]*(?:[ \t]*,[ \t]*[^\s,{}\\%]*)*")
# Optional arguments [..] and biblatex (..) notes: braces may nest two deep, escapes are skipped,
# a single line break is allowed. An unbraced "[" (or "(") ends the attempt, which keeps a run
# of unclosed "\cite[" linear; LaTeX itself cannot read such arguments either.
_BRACED = r"\{(?:[^{}\n]|\{[^{}\n]*\})*\}"
_LINE_BREAK = r"\n(?![ \t]*\r?\n)"
_OPT_ARG_RE = {
    "[": re.compile(r"\[(?:[^\[\]{}\n\\]|\\.|" + _BRACED + "|" + _LINE_BREAK + r")*\]"),
    "(": re.compile(r"\((?:[^()\[\]{}\n\\]|\\.|" + _BRACED + "|" + _LINE_BREAK + r")*\)"),
}
# biblatex's {volume} argument of \volcite: short and on one line; bounded, so that a run of
# unclosed "\volcite{" stays linear.
_VOLUME_RE = re.compile(r"\{[^{}\n]{0,80}\}")
# acro: \DeclareAcronym{id}{..., cite = [pre][post]{keys}, ...}
_ACRONYM_RE = re.compile(r"\\DeclareAcronym(?![A-Za-z@])\*?")
_ACRONYM_ID_RE = re.compile(r"\{[^{}\n]{0,200}\}")
_ACRONYM_CITE_RE = re.compile(r"(?<![A-Za-z])cite[ \t]*=[ \t]*")
_MAX_PROPERTIES = 5000
_KEY_STRIP = " \t\r\n"
_HAS_SPACE_RE = re.compile(r"\s")
_MAX_ARG = 400


# --------------------------------------------------------------------------------------------
# Excluded regions: comments and verbatim
# --------------------------------------------------------------------------------------------

_VERBATIM_BEGIN_RE = re.compile(
    r"\\begin\{(verbatim\*?|Verbatim\*?|BVerbatim|LVerbatim|lstlisting|minted|comment|alltt)\}"
)
_VERB_RE = re.compile(r"\\(?:verb|lstinline)\*?([^A-Za-z\s*{\[])[^\n]*?\1")


def _odd_backslashes_before(text: str, pos: int) -> bool:
    k = pos
    while k > 0 and text[k - 1] == "\\":
        k -= 1
    return (pos - k) % 2 == 1


def _comment_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    pos = text.find("%")
    while pos != -1:
        if _odd_backslashes_before(text, pos):
            pos = text.find("%", pos + 1)
            continue
        eol = text.find("\n", pos)
        if eol == -1:
            eol = len(text)
        spans.append((pos, eol))
        pos = text.find("%", eol)
    return spans


def scan_regions(text: str) -> Regions:
    """Comments (``%`` to end of line, ``\\%`` is not one), verbatim-like environments, ``\\verb``."""
    comments = Regions(_comment_spans(text))
    spans = list(zip(comments.starts, comments.ends, strict=True))
    pos = 0
    while "\\begin{" in text:
        m = _VERBATIM_BEGIN_RE.search(text, pos)
        if m is None:
            break
        if comments.contains(m.start()):
            pos = m.end()
            continue
        end_tag = f"\\end{{{m.group(1)}}}"
        end = text.find(end_tag, m.end())
        end = len(text) if end == -1 else end + len(end_tag)
        spans.append((m.start(), end))
        pos = end
    if "\\verb" in text or "\\lstinline" in text:
        spans.extend(m.span() for m in _VERB_RE.finditer(text) if not comments.contains(m.start()))
    return Regions(spans)


# --------------------------------------------------------------------------------------------
# Citation finding
# --------------------------------------------------------------------------------------------


def skip_ws(text: str, pos: int) -> int:
    """Past the blanks (and at most one line break) between a command's arguments."""
    return _ARG_WS_RE.match(text, pos).end()  # type: ignore[union-attr]  # always matches


def _skip_optional(text: str, pos: int, open_ch: str, limit: int) -> int:
    """Skip up to ``limit`` optional arguments (and the whitespace before them)."""
    for _ in range(limit):
        q = skip_ws(text, pos)
        if q >= len(text) or text[q] != open_ch:
            break
        m = _OPT_ARG_RE[open_ch].match(text, q)
        if m is None:
            break
        pos = m.end()
    return pos


def _mask_comments(body: str) -> str:
    """The key list with ``%`` comments blanked out (same length), so commas in them don't split."""
    if "%" not in body:
        return body
    return re.sub(r"%[^\n]*", lambda m: " " * len(m.group()), body)


def _split_keys(text: str, inner_start: int, inner_end: int) -> list[CiteKey]:
    body = _mask_comments(text[inner_start:inner_end])
    keys = []
    seg_start = 0
    while True:
        comma = body.find(",", seg_start)
        seg_end = len(body) if comma == -1 else comma
        seg = body[seg_start:seg_end]
        stripped = seg.strip(_KEY_STRIP)
        if stripped:
            lead = len(seg) - len(seg.lstrip(_KEY_STRIP))
            s = inner_start + seg_start + lead
        else:
            s = inner_start + seg_end
        keys.append(CiteKey(stripped, s, s + len(stripped), is_placeholder_token(stripped)))
        if comma == -1:
            return keys
        seg_start = comma + 1


def _parse_group(text: str, pos: int) -> tuple[list[CiteKey], int, bool] | None:
    """Keys, end offset and closedness of the key list whose ``{`` is at ``pos``."""
    m = _CLOSED_GROUP_RE.match(text, pos)
    if m:
        keys = _split_keys(text, pos + 1, m.end() - 1)
        # Keys never contain whitespace: "\cite{smi" + newline + "text}" is a list being typed.
        if not any(_HAS_SPACE_RE.search(k.key) for k in keys):
            return keys, m.end(), True
    m = _OPEN_GROUP_RE.match(text, pos)
    end = m.end()  # type: ignore[union-attr]  # matches any "{"
    if end < len(text) and text[end] in "\\{%":
        return None  # a macro or group inside the braces: not a key list being typed
    return _split_keys(text, pos + 1, end), end, False


def _todo_marker(text: str, start: int, q: int, command: str) -> Citation | int | None:
    """After ``\\cite<`` at ``q``: the ``\\cite<>`` to-do marker (a citation), the offset where
    an apacite ``<prefix>`` ends (the key list follows), or None (neither)."""
    n = len(text)
    close = text.find(">", q + 1, min(n, q + _MAX_ARG))
    if close == -1 or "\n" in text[q:close]:
        return None
    after = _skip_optional(text, close + 1, "[", 2)
    nxt = skip_ws(text, after)
    if nxt < n and text[nxt] == "{":
        return close + 1
    if text[q + 1 : close].strip():
        return None
    key = CiteKey("", q + 1, q + 1, True)
    return Citation("latex", command + "<>", start, close + 1, (key,), ((q, close + 1),))


def _key_group_start(text: str, pos: int, volume: bool) -> int | None:
    """Offset of the ``{`` of the next key list after ``pos``: past the optional arguments, and
    for the ``\\volcite`` family past ``[prenote]{volume}[pages]`` (the volume is no key slot)."""
    if volume:
        m = _VOLUME_RE.match(text, skip_ws(text, _skip_optional(text, pos, "[", 1)))
        if m is None:
            return None
        q = skip_ws(text, _skip_optional(text, m.end(), "[", 1))
    else:
        q = skip_ws(text, _skip_optional(text, pos, "[", 2))
    return q if q < len(text) and text[q] == "{" else None


def _key_groups(text: str, pos: int, name: str) -> tuple[list[CiteKey], list[tuple[int, int]], bool]:
    """The key lists of command ``name`` from ``pos``: one, or a multicite command's several."""
    multi = name in MULTICITE_COMMANDS
    volume = name in VOLUME_COMMANDS
    if multi:
        pos = _skip_optional(text, pos, "(", 2)
    keys: list[CiteKey] = []
    groups: list[tuple[int, int]] = []
    closed = True
    while (q := _key_group_start(text, pos, volume)) is not None:
        parsed = _parse_group(text, q)
        if parsed is None:
            break
        gkeys, end, closed = parsed
        keys.extend(gkeys)
        groups.append((q, end))
        pos = end
        if not closed or not multi:
            break
    return keys, groups, closed


def _parse_command(text: str, start: int, pos: int, name: str, command: str) -> Citation | None:
    q = skip_ws(text, pos)
    if q < len(text) and text[q] == "<":  # apacite <prefix>, or the \cite<> to-do marker
        marker = _todo_marker(text, start, q, command)
        if not isinstance(marker, int):
            return marker
        pos = marker
    keys, groups, closed = _key_groups(text, pos, name)
    if not groups:
        return None
    if any("#" in k.key for k in keys):
        return None  # \newcommand{\mycite}[1]{\cite{#1}}: a definition, not a citation
    return Citation("latex", command, start, groups[-1][1], tuple(keys), tuple(groups), closed)


def _acronym_citation(text: str, m: re.Match[str], braces: BraceIndex) -> tuple[Citation | None, int]:
    """The ``cite = {keys}`` of the acro package's ``\\DeclareAcronym{id}{properties}`` at ``m``,
    and where the properties end (the caller skips acronyms nested in them, keeping the scan
    linear). An unclosed property list (being typed) is read to the end of its paragraph."""
    idm = _ACRONYM_ID_RE.match(text, skip_ws(text, m.end()))
    if idm is None:
        return None, m.end()
    q = skip_ws(text, idm.end())
    if q >= len(text) or text[q] != "{":
        return None, m.end()
    close = braces.closing(q, _MAX_PROPERTIES)
    if close is None:
        para = text.find("\n\n", q, q + _MAX_PROPERTIES)
        close = para if para != -1 else min(len(text), q + _MAX_PROPERTIES)
    cite = _ACRONYM_CITE_RE.search(text, q + 1, close)
    if cite is None:
        return None, close
    g = skip_ws(text, _skip_optional(text, cite.end(), "[", 2))
    parsed = _parse_group(text, g) if g < len(text) and text[g] == "{" else None
    if parsed is None or any("#" in k.key for k in parsed[0]):
        return None, close
    keys, end, closed = parsed
    return Citation("latex", "\\DeclareAcronym", m.start(), end, tuple(keys), ((g, end),), closed), close


def _acronym_citations(text: str, regions: Regions) -> list[Citation]:
    """Citations in acro's acronym declarations (texlab completes them too)."""
    if "\\DeclareAcronym" not in text:
        return []
    braces = BraceIndex(text)
    out: list[Citation] = []
    done = 0
    for m in _ACRONYM_RE.finditer(text):
        if m.start() < done or regions.contains(m.start()) or _odd_backslashes_before(text, m.start()):
            continue
        cit, done = _acronym_citation(text, m, braces)
        if cit is not None:
            out.append(cit)
    return out


def scan_citations(text: str, regions: Regions) -> tuple[Citation, ...]:
    """All citation commands outside ``regions`` (comments, verbatim), in document order."""
    if "cite" not in text and "Cite" not in text and "bibentry" not in text:
        return ()
    out = []
    for m in _CMD_RE.finditer(text):
        name = m.group(1)
        if name not in CITE_COMMANDS:
            continue
        start = m.start()
        if regions.contains(start) or (
            start and text[start - 1] == "\\" and _odd_backslashes_before(text, start)
        ):
            continue
        cit = _parse_command(text, start, m.end(), name, f"\\{name}{m.group(2)}")
        if cit is not None:
            out.append(cit)
    acronyms = _acronym_citations(text, regions)
    if acronyms:
        out.extend(acronyms)
        out.sort(key=citation_start)
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Cursor
# --------------------------------------------------------------------------------------------


def _segment_bounds(text: str, inner_start: int, inner_end: int) -> list[tuple[int, int]]:
    body = _mask_comments(text[inner_start:inner_end])
    bounds = []
    pos = 0
    while True:
        comma = body.find(",", pos)
        if comma == -1:
            bounds.append((inner_start + pos, inner_end))
            return bounds
        bounds.append((inner_start + pos, inner_start + comma))
        pos = comma + 1


def slot_edit(text: str, cit: Citation, index: int) -> SlotEdit:
    """``(start, end, before, after)`` that fills key slot ``index`` of ``cit``."""
    if cit.is_todo_marker:
        return cit.start, cit.end, cit.command[:-2] + "{", "}"
    k = cit.keys[index]
    return k.start, k.end, "", ""


def bare_cursor(text: str, offset: int, regions: Regions) -> CursorCitation | None:
    """LaTeX has no key slot outside a citation command."""
    return None


def cursor_in(text: str, cit: Citation, offset: int) -> CursorCitation | None:
    """The key slot of ``cit`` that ``offset`` is in (``\\cite<>`` as a whole is one slot)."""
    if cit.is_todo_marker:
        lt = cit.groups[0][0]
        if lt < offset <= cit.end:
            typed = text[cit.start : offset]
            start, end, before, after = slot_edit(text, cit, 0)
            return CursorCitation(cit, offset, 0, start, end, "", typed, True, before, after)
        return None
    first_key = 0
    last = len(cit.groups) - 1
    for gi, (gs, ge) in enumerate(cit.groups):
        inner_end = ge if (gi == last and not cit.closed) else ge - 1
        segments = _segment_bounds(text, gs + 1, inner_end)
        if gs < offset <= inner_end:
            for si, (ss, se) in enumerate(segments):
                if ss <= offset <= se:
                    return _slot(text, cit, first_key + si, offset)
        first_key += len(segments)
    return None


def _slot(text: str, cit: Citation, index: int, offset: int) -> CursorCitation:
    k = cit.keys[index]
    if not k.key:
        return CursorCitation(cit, offset, index, offset, offset, "", "", True)
    if k.start <= offset <= k.end:
        typed = text[k.start : offset]
        prefix = "" if k.placeholder else typed
        return CursorCitation(cit, offset, index, k.start, k.end, prefix, typed, k.placeholder)
    if offset < k.start:  # in the whitespace before a key: insert a new key before it
        return CursorCitation(cit, offset, None, offset, offset, "", "", True, "", ",")
    return CursorCitation(cit, offset, None, offset, offset, "", "", True, ",", "")
