"""LaTeX citation commands: where they are, what they cite, which key slot the cursor is in.

The scanning half of the LaTeX reader (:mod:`citewise.server.latex` adds prose, title, abstract
and bibliographies, and is the :class:`~citewise.server.scan_model.Scanner`). Why a hand-written
scanner rather than a LaTeX parser: it runs on every keystroke, on drafts that are half-typed and
therefore rarely parse. One precompiled regex finds the command names; a few bounded steps per
hit read the arguments. Everything is linear in the text size.
"""

from __future__ import annotations

import re

from .scan_model import Citation, CiteKey, CursorCitation, Regions, SlotEdit, is_placeholder_token

# --------------------------------------------------------------------------------------------
# Command table
# --------------------------------------------------------------------------------------------

_SINGLE = """
cite citep citet citealp citealt citeauthor citefullauthor citeyear citeyearpar citenum citeNP
parencite textcite autocite footcite footcitetext smartcite supercite nocite fullcite footfullcite
citetitle citeurl citedate citeA citeauthorNP citeyearNP shortcite shortciteA shortciteNP
shortciteauthor fullciteA fullciteNP fullciteauthor citen citeonline bibentry
""".split()
_MULTI = """
cites parencites textcites autocites footcites footcitetexts smartcites supercites
""".split()


def _with_capitals(names: list[str]) -> frozenset[str]:
    return frozenset(names) | frozenset(n[0].upper() + n[1:] for n in names)


MULTICITE_COMMANDS: frozenset[str] = _with_capitals(_MULTI)
"""biblatex multicite commands: ``(pre)(post)`` global notes, then repeated ``[pre][post]{keys}``."""

CITE_COMMANDS: frozenset[str] = _with_capitals(_SINGLE) | MULTICITE_COMMANDS
"""Command names (without backslash) whose brace argument is a list of citation keys.

Capitalised forms (``\\Citep``, ``\\Textcite``...) are included for every name; a capitalised
form that no package defines costs nothing. ``\\volcite`` and friends are left out on purpose:
their first brace argument is a volume, not a key.
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


def _parse_command(text: str, start: int, pos: int, name: str, command: str) -> Citation | None:
    n = len(text)
    multi = name in MULTICITE_COMMANDS
    q = skip_ws(text, pos)
    if q < n and text[q] == "<":  # apacite <prefix>, or the \cite<> to-do marker
        close = text.find(">", q + 1, min(n, q + _MAX_ARG))
        if close == -1 or "\n" in text[q:close]:
            return None
        after = _skip_optional(text, close + 1, "[", 2)
        nxt = skip_ws(text, after)
        if nxt >= n or text[nxt] != "{":
            if text[q + 1 : close].strip():
                return None
            key = CiteKey("", q + 1, q + 1, True)
            return Citation("latex", command + "<>", start, close + 1, (key,), ((q, close + 1),))
        pos = close + 1
    if multi:
        pos = _skip_optional(text, pos, "(", 2)
    keys: list[CiteKey] = []
    groups: list[tuple[int, int]] = []
    closed = True
    while True:
        q = skip_ws(text, _skip_optional(text, pos, "[", 2))
        if q >= n or text[q] != "{":
            break
        parsed = _parse_group(text, q)
        if parsed is None:
            break
        gkeys, end, closed = parsed
        keys.extend(gkeys)
        groups.append((q, end))
        pos = end
        if not closed or not multi:
            break
    if not groups:
        return None
    if any("#" in k.key for k in keys):
        return None  # \newcommand{\mycite}[1]{\cite{#1}}: a definition, not a citation
    return Citation("latex", command, start, groups[-1][1], tuple(keys), tuple(groups), closed)


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
