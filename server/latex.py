"""LaTeX scanner: natbib/biblatex/apacite citation commands, comments, title/abstract, bibliographies.

Why a hand-written scanner rather than a LaTeX parser: it runs on every keystroke, on drafts
that are half-typed and therefore rarely parse. One precompiled regex finds the command names;
a few bounded steps per hit read the arguments. Everything is linear in the text size.

This module is a :class:`~citewise.server.scan_model.Scanner` (its public functions are the
protocol's); it imports only the shared data model, and :mod:`citewise.server.draft` caches its
results per document.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from citewise.indexer.braces import BraceIndex, closing_brace

from .scan_model import (
    Citation,
    CiteKey,
    CursorCitation,
    ReadFile,
    Regions,
    SlotEdit,
    cut_text,
    is_placeholder_token,
    normalize_space,
)

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


def _skip_ws(text: str, pos: int) -> int:
    return _ARG_WS_RE.match(text, pos).end()  # type: ignore[union-attr]  # always matches


def _skip_optional(text: str, pos: int, open_ch: str, limit: int) -> int:
    """Skip up to ``limit`` optional arguments (and the whitespace before them)."""
    for _ in range(limit):
        q = _skip_ws(text, pos)
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
    q = _skip_ws(text, pos)
    if q < n and text[q] == "<":  # apacite <prefix>, or the \cite<> to-do marker
        close = text.find(">", q + 1, min(n, q + _MAX_ARG))
        if close == -1 or "\n" in text[q:close]:
            return None
        after = _skip_optional(text, close + 1, "[", 2)
        nxt = _skip_ws(text, after)
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
        q = _skip_ws(text, _skip_optional(text, pos, "[", 2))
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


# For callers that hold this module rather than the facade; the cached one is
# :func:`citewise.server.draft.excluded_regions`.
excluded_regions = scan_regions


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


# --------------------------------------------------------------------------------------------
# Plain text
# --------------------------------------------------------------------------------------------

_DROP_ONE = """
label ref eqref autoref cref Cref pageref nameref vref Vref url input include includegraphics includeonly
subfile bibliography bibliographystyle addbibresource begin end usepackage RequirePackage documentclass
vspace hspace pagestyle thispagestyle hypersetup graphicspath affil orcid email thanks footnotemark tnote
fnref corref todo printbibliography bibitem keywords
""".split()
_DROP_TWO = "setlength addtolength setcounter newcommand renewcommand providecommand DeclareMathOperator import subimport crefrange".split()
_DROP_ARGS: dict[str, int] = {**dict.fromkeys(_DROP_ONE, 1), **dict.fromkeys(_DROP_TWO, 2)}
# Commands whose arguments are not prose: dropped with their optional and brace arguments.
_DROP_RE = re.compile(
    r"\\("
    + "|".join(sorted(_DROP_ARGS, key=len, reverse=True))
    + r")(?![A-Za-z@])\*?(?:[ \t]*\[[^\[\]\n]{0,200}\])*"
)


def _drop_commands(fragment: str) -> str:
    """Remove non-prose commands with their arguments; brace arguments may nest."""
    out = []
    pos = 0
    braces = BraceIndex(fragment)  # built on first use: one linear pass, however many commands
    for m in _DROP_RE.finditer(fragment):
        if m.start() < pos:
            continue
        end = m.end()
        for _ in range(_DROP_ARGS[m.group(1)]):
            q = _skip_ws(fragment, end)
            if q >= len(fragment) or fragment[q] != "{":
                break
            close = braces.closing(q, _MAX_GROUP)
            if close is None:
                break
            end = close + 1
        out.append(fragment[pos : m.start()])
        out.append(" ")
        pos = end
    out.append(fragment[pos:])
    return "".join(out)


_HREF_RE = re.compile(r"\\href\s*\{[^{}]*\}")
_TOKEN_RE = re.compile(r"\\([A-Za-z@]+)\*?|\\(.)|[{}$~]|\\$", re.DOTALL)
_ESCAPED = set("&%$#_{}")
_SPACING = set("\\,;:! >\n\t")


def _token(m: re.Match[str]) -> str:
    if m.group(1) is not None:
        return " "
    sym = m.group(2)
    if sym is not None:
        if sym in _ESCAPED:
            return sym
        return " " if sym in _SPACING else ""
    return " " if m.group() == "~" else ""


def to_plain(fragment: str) -> str:
    """LaTeX source (comments and citations already cut) to prose: commands go, their text stays.

    ``\\emph{deep} nets`` -> ``deep nets``; ``\\ref{x}``, ``\\label{x}``, ``\\url{x}`` and other
    non-prose arguments go entirely; ``\\%`` becomes ``%``. Math is kept as its text.
    """
    if "\\" in fragment:
        fragment = _HREF_RE.sub(" ", fragment)
        fragment = _drop_commands(fragment)
    return _TOKEN_RE.sub(_token, fragment)


def plain(fragment: str) -> str:
    """A self-contained fragment (a title, an abstract) to normalised prose."""
    regions = scan_regions(fragment)  # uncached: fragments must not evict the document's entries
    cuts = [(c.start, c.end) for c in scan_citations(fragment, regions)]
    cuts.extend(zip(regions.starts, regions.ends, strict=True))
    cuts.sort()
    return normalize_space(to_plain(cut_text(fragment, 0, len(fragment), cuts)))


# --------------------------------------------------------------------------------------------
# Title, abstract and included files
# --------------------------------------------------------------------------------------------

_TITLE_RE = re.compile(r"\\(?:title|icmltitle|Title)(?![A-Za-z@])\s*(?:\[[^\[\]]{0,500}\]\s*)?\{")
_ABSTRACT_ENV_RE = re.compile(r"\\begin\{abstract\}(?:\s*\[[^\[\]\n]{0,200}\])?")
_ABSTRACT_END_RE = re.compile(r"\\end\{abstract\}")
_ABSTRACT_CMD_RE = re.compile(r"\\abstract(?![A-Za-z@])\s*\{")
_INCLUDE_RE = re.compile(
    r"\\(?:input|include|subfile|subfileinclude)(?![A-Za-z@])\s*\{([^{}\n]+)\}"
    r"|\\(?:sub)?(?:import|inputfrom|includefrom)\*?\s*\{([^{}\n]*)\}\s*\{([^{}\n]+)\}"
)
_MAX_FILES = 200
_MAX_GROUP = 20000  # a title, abstract or dropped argument longer than this is not one
_MAX_DEPTH = 16


def _first(pattern: re.Pattern[str], text: str, regions: Regions) -> re.Match[str] | None:
    for m in pattern.finditer(text):
        if not regions.contains(m.start()):
            return m
    return None


def _includes(text: str, regions: Regions) -> Iterator[str]:
    if "\\" not in text:
        return
    for m in _INCLUDE_RE.finditer(text):
        if regions.contains(m.start()):
            continue
        if m.group(1) is not None:
            yield m.group(1).strip()
        else:
            folder, name = m.group(2).strip(), m.group(3).strip()
            yield posixpath.join(folder, name) if folder else name


class _Walker:
    """Follows included files through ``read_file``, each at most once (cycles end there)."""

    def __init__(self, read_file: ReadFile | None) -> None:
        self.read_file = read_file
        self.seen: set[str] = set()

    def read(self, name: str) -> str | None:
        if self.read_file is None or len(self.seen) >= _MAX_FILES:
            return None
        norm = posixpath.normpath(name.replace("\\", "/"))
        base = norm[:-4] if norm.lower().endswith(".tex") else norm
        if base in self.seen:
            return None
        self.seen.add(base)
        candidates = [name] if name.lower().endswith(".tex") else [name + ".tex", name]
        for cand in candidates:
            try:
                content = self.read_file(cand)
            except Exception:  # a failing reader must not break completion
                content = None
            if content is not None:
                return content
        return None

    def expand(self, fragment: str, depth: int) -> str:
        """``fragment`` with its ``\\input``-like commands replaced by the files' text."""
        if depth > _MAX_DEPTH or "\\" not in fragment:
            return fragment
        regions = scan_regions(fragment)
        out = []
        pos = 0
        for m in _INCLUDE_RE.finditer(fragment):
            if regions.contains(m.start()):
                continue
            name = m.group(1) or posixpath.join(m.group(2).strip(), m.group(3).strip())
            sub = self.read(name.strip())
            if sub is None:
                continue
            out.append(fragment[pos : m.start()])
            out.append(self.expand(sub, depth + 1))
            pos = m.end()
        out.append(fragment[pos:])
        return "".join(out)

    def title_abstract(
        self, text: str, depth: int = 0, regions: Regions | None = None
    ) -> tuple[str | None, str | None]:
        """Raw title and abstract; ``regions`` are ``text``'s own when the caller has them."""
        if regions is None:
            regions = scan_regions(text)
        title = abstract = None
        m = _first(_TITLE_RE, text, regions)
        if m:
            end = closing_brace(text, m.end() - 1, _MAX_GROUP)
            if end is not None:
                title = text[m.end() : end]
        m = _first(_ABSTRACT_ENV_RE, text, regions)
        if m:
            e = _ABSTRACT_END_RE.search(text, m.end())
            abstract = text[m.end() : e.start() if e else len(text)]
        else:
            m = _first(_ABSTRACT_CMD_RE, text, regions)
            if m:
                end = closing_brace(text, m.end() - 1, _MAX_GROUP)
                if end is not None:
                    abstract = text[m.end() : end]
        if abstract is not None:
            abstract = self.expand(abstract, depth + 1)
        if (title is None or abstract is None) and depth < _MAX_DEPTH:
            for name in _includes(text, regions):
                sub = self.read(name)
                if sub is None:
                    continue
                t, a = self.title_abstract(sub, depth + 1)
                title = title if title is not None else t
                abstract = abstract if abstract is not None else a
                if title is not None and abstract is not None:
                    break
        return title, abstract


def global_context(
    text: str, read_file: ReadFile | None = None, regions: Regions | None = None
) -> tuple[str, str]:
    """Title and abstract as plain text, following included files for what the main file lacks."""
    title, abstract = _Walker(read_file).title_abstract(text, 0, regions)
    return plain(title or ""), plain(abstract or "")


# --------------------------------------------------------------------------------------------
# Bibliography declarations
# --------------------------------------------------------------------------------------------

_BIB_RE = re.compile(
    r"\\(bibliography|nobibliography|addbibresource|addglobalbib|addsectionbib)(?![A-Za-z@])\*?\s*"
    r"(?:\[([^\[\]]*)\]\s*)?\{([^{}]*)\}"
)
_REMOTE_RE = re.compile(r"location\s*=\s*\{?\s*remote", re.IGNORECASE)


def _bib_names(text: str, regions: Regions) -> Iterator[str]:
    for m in _BIB_RE.finditer(text):
        if regions.contains(m.start()):
            continue
        command, options, arg = m.groups()
        if command in ("bibliography", "nobibliography"):
            for part in arg.split(","):
                name = part.strip()
                if name:
                    yield name if name.lower().endswith(".bib") else name + ".bib"
        else:
            name = arg.strip()
            if not name or (options and _REMOTE_RE.search(options)) or "://" in name:
                continue
            yield name


def bibliography_files(
    text: str, read_file: ReadFile | None = None, regions: Regions | None = None
) -> list[str]:
    """``\\bibliography``/``\\addbibresource`` names of the draft and of the files it includes."""
    walker = _Walker(read_file)
    names: list[str] = []

    def visit(t: str, depth: int, regions: Regions | None = None) -> None:
        if regions is None:
            regions = scan_regions(t)
        for name in _bib_names(t, regions):
            if name not in names:
                names.append(name)
        if read_file is None or depth >= _MAX_DEPTH:
            return
        for inc in _includes(t, regions):
            sub = walker.read(inc)
            if sub is not None:
                visit(sub, depth + 1)

    visit(text, 0, regions)
    return names
