"""The LaTeX reader: a :class:`~citewise.server.scan_model.Scanner` for natbib/biblatex/apacite drafts.

Citation commands, comments and the cursor are read by :mod:`citewise.server.latex_cite`
(re-exported here, so this module is the whole scanner); this module adds what reads the draft
as prose: LaTeX to plain text, the title and abstract (following ``\\input`` and friends) and the
declared bibliographies. It imports only the shared data model; :mod:`citewise.server.draft`
caches its results per document.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from citewise.indexer.braces import BraceIndex, closing_brace

from .latex_cite import (
    CITE_COMMANDS,
    MULTICITE_COMMANDS,
    bare_cursor,
    cursor_in,
    scan_citations,
    scan_regions,
    skip_ws,
    slot_edit,
)
from .scan_model import ReadFile, Regions, prose

__all__ = [
    "CITE_COMMANDS",
    "MULTICITE_COMMANDS",
    "bare_cursor",
    "bibliography_files",
    "cursor_in",
    "global_context",
    "plain",
    "scan_citations",
    "scan_regions",
    "slot_edit",
    "to_plain",
]


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
            q = skip_ws(fragment, end)
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
    return prose(fragment, scan_citations(fragment, regions), regions, to_plain)


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
