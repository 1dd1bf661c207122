"""Field values for inserted BibTeX entries: text that pdfLaTeX, BibTeX and biber all accept.

Two kinds of input reach the BibTeX writer:

* **Clean Unicode** (what every importer stores: ACL XML, JSON Lines, the cleaned columns of a
  BibTeX record), spelled in TeX by :mod:`~citewise.indexer.tex_escape`.
* **Source TeX from a bulk export** (the original field text of an ACM Digital Library entry):
  TeX that is valid (``\\&``, ``{\\"u}``, ``$x^2$``, ``{{BERT}}``) mixed with web residue
  (``&amp;``, ``<sup>``, ``<i>``, MathML, stray ``&`` / ``%`` / ``_``, unknown or package-only
  commands, half-written math). This module's :func:`source_to_tex` parses it into a small tree
  (text, groups, formatting commands, math) and writes that tree back with ``tex_escape``: valid
  TeX survives with its meaning (no double escaping, because escapes are decoded into text first),
  tags become ``\\textsuperscript{}`` / ``\\textit{}`` ..., math is kept only when it uses commands
  the LaTeX kernel defines and is well formed (:mod:`~citewise.indexer.tex_math`; else it becomes
  text), and braces are balanced by construction. Everything emitted is LaTeX-kernel TeX, so an
  entry needs no package in the user's preamble.

The scanners walk the text once (no regex with nested quantifiers over user text), so an
adversarial field cannot stall the language server.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from .braces import BraceIndex
from .tex_escape import tex_escape, tex_title
from .tex_math import HTML_TAG, clean_math
from .texclean import _SYMBOLS, match_accent, tex_to_unicode

# -- source TeX (with web residue) -> TeX ----------------------------------------------------------

_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")

# HTML / JATS / MathML element -> the kernel command that renders it.
_TAG_COMMANDS: dict[str, str] = {
    **dict.fromkeys(("i", "em", "italic", "emphasis", "var", "cite", "dfn"), "textit"),
    **dict.fromkeys(("b", "strong", "bold"), "textbf"),
    **dict.fromkeys(("sup", "superscript"), "textsuperscript"),
    **dict.fromkeys(("sub", "inf", "subscript"), "textsubscript"),
    **dict.fromkeys(("scp", "sc", "smallcaps", "small-caps"), "textsc"),
    **dict.fromkeys(("tt", "code", "kbd", "samp", "literal", "monospace", "mono"), "texttt"),
    **dict.fromkeys(("u", "underline", "ins"), "underline"),
}
_BLOCK_TAGS = frozenset("br p div li ul ol h1 h2 h3 h4 h5 h6 tr td th table blockquote hr".split())

# Text-mode commands with one argument that the kernel defines (some renamed to one it does).
_ARG_COMMANDS: dict[str, str] = {
    **{
        c: c
        for c in (
            "textit",
            "textbf",
            "textsc",
            "texttt",
            "textrm",
            "textsf",
            "textsl",
            "textup",
            "textmd",
            "textnormal",
            "emph",
            "textsuperscript",
            "textsubscript",
            "underline",
        )
    },
    "mathrm": "textrm",
    "mathbf": "textbf",
    "mathit": "textit",
    "mathsf": "textsf",
    "mathtt": "texttt",
    "bm": "textbf",
    "boldsymbol": "textbf",
}
# Wrappers whose argument is kept without the command (not kernel, or meaningless in a .bib).
_TRANSPARENT = frozenset(
    "mbox hbox text ensuremath NoCaseChange MakeUppercase MakeLowercase uppercase lowercase fbox".split()
)
# Commands whose argument is no text of the field (a cross-reference, a length): both go.
_DROPPED_WITH_ARG = frozenset("cite citep citet ref eqref pageref label index hspace vspace".split())
# Old-style declarations (``{\bf x}``) -> the LaTeX2e switch (``\bf`` is not defined by every class).
_DECLARATIONS: dict[str, str] = {
    "bf": "bfseries",
    "it": "itshape",
    "em": "em",
    "sc": "scshape",
    "tt": "ttfamily",
    "rm": "rmfamily",
    "sf": "sffamily",
    "sl": "slshape",
    "bfseries": "bfseries",
    "itshape": "itshape",
    "scshape": "scshape",
    "ttfamily": "ttfamily",
    "rmfamily": "rmfamily",
    "sffamily": "sffamily",
    "slshape": "slshape",
    "upshape": "upshape",
    "mdseries": "mdseries",
    "normalfont": "normalfont",
}
_DROPPED = frozenset(
    "protect relax ignorespaces noindent xspace unskip nobreak small large Large LARGE huge "
    "Huge tiny scriptsize footnotesize normalsize smallskip medskip bigskip hfill vfill "
    "left right bigl bigr Bigl Bigr biggl biggr displaystyle textstyle".split()
)
_SPACES = frozenset("par newline linebreak quad qquad enspace enskip".split())
_KERNEL_TEXT = {"LaTeX": r"\LaTeX{}", "TeX": r"\TeX{}", "LaTeXe": r"\LaTeXe{}", "today": ""}


_MAX_NESTING = 64  # groups and tags; the emitter recurses once per level


@dataclass
class _Node:
    """Part of a parsed field: ``kind`` is text (Unicode), tex (safe TeX as is), math (validated
    math without the dollars), group (source braces) or cmd (``\\name{children}``)."""

    kind: str
    value: str = ""
    children: list[_Node] = field(default_factory=list)


@dataclass
class _Frame:
    kind: str  # root | group | cmd | tag
    name: str = ""
    special: bool = False  # a group opening with a backslash: {\'e}, BibTeX's "special character"
    children: list[_Node] = field(default_factory=list)


def decode_entities(text: str) -> str:
    """``&amp;`` -> ``&``, ``&#8211;`` -> ``–`` (twice, for ``&amp;lt;``); a bare ``&`` is text."""
    for _ in range(2):
        if "&" not in text:
            break
        text = _ENTITY.sub(lambda m: html.unescape(m.group(0)), text)
    return text


class _SourceParser:
    """One pass over a BibTeX field value: TeX and HTML to a tree of :class:`_Node`."""

    def __init__(self, text: str) -> None:
        self.s = decode_entities(text)
        self.braces = BraceIndex(self.s)  # one linear pass, however many \url{ wait for a match
        self.stack: list[_Frame] = [_Frame("root")]
        self.buf: list[str] = []
        self.no_closing_dollar = False
        self.flattened = 0  # groups opened beyond _MAX_NESTING, whose } are dropped too

    # -- tree building
    def flush(self) -> None:
        if self.buf:
            text = "".join(self.buf)
            self.buf = []
            # Ligatures of source TeX are characters; tex_escape spells them back.
            text = text.replace("---", "—").replace("--", "–").replace("``", "“").replace("''", "”")
            self._append_text(text)

    def _append_text(self, text: str) -> None:
        """Adjacent text is one node, so that title words split by ``{\\'e}`` stay one word."""
        children = self.stack[-1].children
        if children and children[-1].kind == "text":
            children[-1].value += text
        else:
            children.append(_Node("text", text))

    def add(self, node: _Node) -> None:
        self.flush()
        self.stack[-1].children.append(node)

    def push(self, kind: str, name: str = "", special: bool = False) -> None:
        if len(self.stack) > _MAX_NESTING:  # deeper than any real field: the group is flattened
            if kind != "tag":
                self.flattened += 1
            return
        self.flush()
        self.stack.append(_Frame(kind, name, special))

    def pop(self) -> None:
        self.flush()
        frame = self.stack.pop()
        if frame.kind == "group":
            only = frame.children[0] if len(frame.children) == 1 else None
            if frame.special and only is not None and only.kind == "text" and len(only.value) == 1:
                # {\'e}: one letter, not a protecting group; tex_escape writes it as BibTeX wants.
                self._append_text(only.value)
                return
            if not frame.children:
                return  # {} after a command: nothing to keep
            node = _Node("group", children=frame.children)
        elif frame.name:
            node = _Node("cmd", frame.name, frame.children)
        else:  # a transparent wrapper: its children only
            self.stack[-1].children.extend(frame.children)
            return
        self.stack[-1].children.append(node)

    def close_brace(self) -> None:
        """``}`` closes the innermost group or command argument (and tags opened inside it)."""
        if self.flattened:
            self.flattened -= 1
            return
        depth = next(
            (i for i in range(len(self.stack) - 1, 0, -1) if self.stack[i].kind in ("group", "cmd")), 0
        )
        if depth == 0:
            return  # unmatched: dropped
        while len(self.stack) > depth:
            self.pop()

    def close_tag(self, name: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            frame = self.stack[i]
            if frame.kind != "tag":
                return  # a TeX group is open inside the tag: the close tag is ignored
            if frame.name == name:
                while len(self.stack) > i:
                    self.pop()
                return

    # -- scanning
    def parse(self) -> list[_Node]:
        s, n = self.s, len(self.s)
        i = 0
        while i < n:
            c = s[i]
            if c == "\\":
                i = self.control(i)
            elif c == "{":
                self.push("group", special=s.startswith("\\", i + 1))
                i += 1
            elif c == "}":
                self.close_brace()
                i += 1
            elif c == "$":
                i = self.math(i)
            elif c == "<":
                i = self.tag(i)
            elif c == "~":
                prev = s[i - 1] if i else " "
                tie = (prev.isalnum() or prev in ".,;:)]}'") and i + 1 < n and not s[i + 1].isspace()
                self.buf.append("\u00a0" if tie else "~")
                i += 1
            elif c in "\t\n\r":
                self.buf.append(" ")
                i += 1
            else:
                self.buf.append(c)
                i += 1
        while len(self.stack) > 1:
            self.pop()
        self.flush()
        return self.stack[0].children

    def tag(self, i: int) -> int:
        m = HTML_TAG.match(self.s, i)
        if m is None:
            self.buf.append("<")
            return i + 1
        closing, name = m.group(1), m.group(2).lower().rsplit(":", 1)[-1]
        empty = bool(m.group(4)) or m.group(3).rstrip().endswith("/")
        cmd = _TAG_COMMANDS.get(name)
        if name in _BLOCK_TAGS:
            self.buf.append(" ")
        elif cmd is not None and not empty:
            if closing:
                self.close_tag(cmd)
            else:
                self.push("tag", cmd)
        return m.end()

    def control(self, i: int) -> int:
        s, n = self.s, len(self.s)
        j = i + 1
        if j >= n:
            self.buf.append("\\")
            return n
        c = s[j]
        if c.isascii() and c.isalpha():
            k = j
            while k < n and s[k].isascii() and s[k].isalpha():
                k += 1
            name = s[j:k]
            if k < n and s[k] == "*":
                k += 1
            end = k
            while end < n and s[end] in " \t\n\r":
                end += 1
            return self.command(i, name, k, end)
        if c in "&%$#_{}":
            self.buf.append(c)
            return j + 1
        if c in "'`^\"~=.":
            return self.accent(i, j + 1)
        if c in "\\ \t\n\r;:>":
            self.buf.append(" ")
            return j + 1
        if c == "-":
            self.add(_Node("tex", "\\-"))
        elif c == ",":
            self.add(_Node("tex", "\\,"))
        elif c not in "@/!()[]":
            self.buf.append("\\")
            return j
        return j + 1

    def accent(self, i: int, after: int) -> int:
        """An accent command at ``i`` (its name ends at ``after``) with its letter, as one character."""
        accent = match_accent(self.s, i)
        if accent is not None:
            self.buf.append(accent[0])
            return accent[1]
        if after < len(self.s) and self.s[after] == "{":  # nested: \~{\^e}
            close = self.braces.closing(after)
            if close is not None:
                self.buf.append(tex_to_unicode(self.s[i : close + 1]))
                return close + 1
        return after  # an accent over nothing: dropped

    def command(self, i: int, name: str, k: int, end: int) -> int:
        """A control word at ``i``; ``k`` ends its name, ``end`` the spaces TeX skips after it."""
        s, n = self.s, len(self.s)
        if len(name) == 1 and name in "cvuHrkdbt":
            return self.accent(i, end)
        if name in _SYMBOLS:
            ch = _SYMBOLS[name]
            self.buf.append("~" if ch == "\ue003" else ch)
            return end
        has_arg = end < n and s[end] == "{"
        if name in ("url", "path") and has_arg:
            close = self.braces.closing(end)
            if close is not None:
                self.add(_Node("cmd", "texttt", [_Node("text", s[end + 1 : close])]))
                return close + 1
        if (name == "href" or name in _DROPPED_WITH_ARG) and has_arg:
            close = self.braces.closing(end)
            if close is not None:
                if name == "hspace":
                    self.buf.append(" ")
                return close + 1  # (\href: the link target goes; its text, the next group, stays)
        if name in _ARG_COMMANDS and has_arg:
            self.push("cmd", _ARG_COMMANDS[name])
            return end + 1
        if name in _TRANSPARENT and has_arg:
            self.push("cmd")
            return end + 1
        if name in _DECLARATIONS:
            if self.stack[-1].kind == "group":  # only inside a group: it would leak otherwise
                self.add(_Node("tex", "\\" + _DECLARATIONS[name] + " "))
            return end
        if name in _KERNEL_TEXT:
            self.add(_Node("tex", _KERNEL_TEXT[name]))
            return end
        if name in _DROPPED or name in _ARG_COMMANDS or name in _TRANSPARENT:
            return end
        if name in _SPACES:
            self.buf.append(" ")
            return end
        # Unknown (\cite, \logn, package commands): its name as a word, as the store's text has it.
        self.buf.append(name + (" " if end > k else ""))
        return end

    def math(self, i: int) -> int:
        s, n = self.s, len(self.s)
        display = i + 1 < n and s[i + 1] == "$"
        start = i + 2 if display else i + 1
        close = None if self.no_closing_dollar else _closing_dollar(s, start)
        if close is None:
            self.no_closing_dollar = True
            self.buf.append("$")
            return i + 1
        after = close + (2 if display and s.startswith("$$", close) else 1)
        content = s[start:close]
        if not content.strip():
            return after
        cleaned = clean_math(content)
        if cleaned is not None:
            self.add(_Node("math", cleaned))
        else:  # not math the kernel can typeset: its readable text
            self.buf.append(tex_to_unicode("$" + content + "$"))
        return after


def _closing_dollar(s: str, pos: int) -> int | None:
    i = pos
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "$":
            return i
        i += 1
    return None


# -- emitting ------------------------------------------------------------------------------------


def _join(parts: list[str]) -> str:
    """Concatenate TeX pieces; ``$a$`` + ``$b$`` must not make ``$$`` (display math)."""
    out: list[str] = []
    for part in parts:
        if not part:
            continue
        if out and out[-1].endswith("$") and not out[-1].endswith("\\$") and part.startswith("$"):
            out.append("{}")
        out.append(part)
    return "".join(out)


def _emit(nodes: list[_Node], title: bool, top: bool, at_start: bool = True) -> str:
    parts: list[str] = []
    for node in nodes:
        if node.kind == "text":
            text = node.value
            parts.append(tex_title(text, at_start) if title and top else tex_escape(text))
            if text.strip():
                at_start = False
        elif node.kind == "tex":
            parts.append(node.value)
        elif node.kind == "math":
            # Braced in titles: change.case$ would lower \Delta to \delta.
            parts.append("{$" + node.value + "$}" if title and top else "$" + node.value + "$")
            at_start = False
        elif node.kind == "group":
            parts.append("{" + _emit(node.children, title, False) + "}")
            at_start = False
        elif node.kind == "cmd":
            inner = _emit(node.children, title, False)
            if inner.strip():
                parts.append("\\" + node.value + "{" + inner + "}")
                at_start = False
    return _join(parts)


def source_to_tex(raw: str, *, title: bool = False) -> str:
    """A field value from a BibTeX export (TeX with HTML residue) as safe, balanced TeX.

    ``title``: protect capitals (``{BERT}``) and math from bibliography styles' case changes.
    """
    nodes = _SourceParser(raw).parse()
    return " ".join(_emit(nodes, title, True).split())


def balanced(tex: str) -> bool:
    """Braces balanced and an even number of unescaped ``$``.

    Every brace counts, ``\\{`` too: BibTeX and biber count braces without regard to backslashes,
    so a value is only safe when balanced that way (and then TeX agrees, as nothing here writes
    ``\\{``).
    """
    depth = 0
    dollars = 0
    i = 0
    n = len(tex)
    while i < n:
        c = tex[i]
        if c == "\\" and i + 1 < n and tex[i + 1] not in "{}":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return False
        elif c == "$":
            dollars += 1
        i += 1
    return depth == 0 and dollars % 2 == 0
