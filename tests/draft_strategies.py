"""Hypothesis strategies for drafts that reach what the draft reader is for.

Why structured drafts: the earlier strategies joined random tokens, and an audit of 1,000 of them
found 0 with a bibliography, 22 with a placeholder and 85 with the cursor inside a citation, so
the properties about those rarely ran. A :func:`drafts` example is a LaTeX or Markdown document
built from parts -- a preamble or YAML front matter with a title, an abstract and (most of the
time) a bibliography declaration; prose; citations written the many ways users write them,
most with a placeholder key and some still being typed; and a little noise (the old token soup:
comments, fences, stray braces) so the readers still meet broken input. The builder records where
each key slot is, so the cursor can be put inside one.

Every choice lists the wanted case first: Hypothesis starts from, and shrinks towards, the first
option, so the simplest draft has a bibliography, a placeholder and the cursor in a citation.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from hypothesis import strategies as st

from citewise.server.draft import Lang

# fmt: off
TOKENS = [
    "\\cite", "\\citep", "\\Textcite", "\\parencites", "\\cites", "\\cite*", "\\nocite", "\\cite<>", "<", ">",
    "{", "}", "[", "]", "(", ")", ",", ";", "@", "-@", "[@", "@{", "?", "??", "TODO", "XXX", "%", "\\%",
    "\\\\", "\\", "\n", "\n\n", "\r\n", "\r", " ", "\t", "$", "`", "```", "~~~", "---\n", "...\n", "<!--", "-->",
    "\\begin{verbatim}", "\\end{verbatim}", "\\verb|", "|", "\\title", "\\begin{abstract}", "\\end{abstract}",
    "\\abstract", "\\input{", "\\include{", "\\import{", "\\bibliography{", "\\addbibresource[", "location=remote",
    "title: ", "abstract: |\n  ", "bibliography:\n  - ", "'", '"', "#", "# ", "## Abstract\n", "% ", "@fig-", "@sec:",
    "me@example.com", "smith2020Deep", "doe:2019:abc", "10.1145/3331184.3331211", "a", "b", "key", ".", ":",
    "/", "😀", "é", "\u2028", "\x00", "_", "*", "^[", "![", "](", "\\emph", "\\label", "\\thanks", "\\href",
    "@article{", "@string{",
]
# fmt: on

noise_texts = st.one_of(
    st.lists(st.sampled_from(TOKENS), max_size=40).map("".join),
    st.text(alphabet=string.printable + "😀é\u2028", max_size=80),
    st.text(max_size=60),
)
"""Any text at all: the old token soup, for properties that must hold on everything."""

PLACEHOLDER_KEYS = ["?", "", "TODO", "??", "XXX", "tbd", "...", "FIXME"]
MD_PLACEHOLDER_KEYS = [k for k in PLACEHOLDER_KEYS if k != "..."]  # "@..." is no Pandoc key
REAL_KEYS = ["smith2020deep", "doe:2019:abc", "vaswani2017", "lee_et-al.2021", "Ng2004", "k1"]
WORDS = "deep neural ranking models retrieve relevant passages for the query we show that clicks are biased".split()
PUNCT = [" ", " ", " ", ". ", ", ", "\n", "\n\n", " (", ") "]

LATEX_COMMANDS = [
    "\\cite",
    "\\citep",
    "\\citet",
    "\\parencite",
    "\\textcite",
    "\\Citep",
    "\\autocite",
    "\\cite*",
    "\\footcite",
    "\\citeauthor",
    "\\nocite",
    "\\citeA",
]
LATEX_OPTIONAL = ["", "[see]", "[][p.~3]", "[see][p. 3]", " [e.g.] "]


def _none_inside(options: list[str]) -> st.SearchStrategy[str | None]:
    """One of ``options`` nine times in ten or more, else ``None``.

    ``None`` goes in the middle of the list: Hypothesis draws the ends of a range more often than
    the rest, shrinks to the first, and copies choices between examples, so a rare ``None`` must
    be really rare for the rate over a hundred examples to stay high.
    """
    return st.sampled_from([*options, None, *options])


LATEX_BIBS = [
    "\\bibliography{refs}",
    "\\addbibresource{refs.bib}",
    "\\bibliography{refs, more}",
    "\\addbibresource[datatype=bibtex]{lib/refs.bib}",
    "\\nobibliography{refs}",
    "\\addglobalbib{g.bib}",
]
INCLUDED = ["a", "b.tex", "x/y"]
INCLUDED_TEXTS = [
    "\\title{Included title}\n\\bibliography{inc}\n",
    "\\input{a}\n\\input{b}\n",
    "\\begin{abstract}Included \\cite{?} abstract.\\end{abstract}\n\\addbibresource{i.bib}\n",
    "---\ntitle: Included\nbibliography: inc.bib\n---\n",
    "",
]
included_files = st.dictionaries(
    st.sampled_from([*INCLUDED, "a.tex", "x/y.tex"]),
    st.one_of(st.sampled_from(INCLUDED_TEXTS), noise_texts),
    max_size=3,
)
"""What ``read_file`` returns for the files a draft includes: titles, bibliographies, cycles, noise."""
MD_BIBS = [
    "bibliography: refs.bib\n",
    "bibliography:\n  - refs.bib\n  - more.bib\n",
    "bibliography: [refs.bib, more.bib]\n",
    "bibliography: 'lib/refs.bib'\n",
]


@dataclass(frozen=True)
class Draft:
    """A generated document, the ``[start, end]`` ranges of its key slots, and a cursor in one of them.

    The cursor is always put in a key slot (noise before it may still have turned that citation
    into a comment or code); a property about any offset draws its own.
    """

    lang: Lang
    text: str
    slots: tuple[tuple[int, int], ...]
    cursor: int


class _Builder:
    """Concatenates parts and keeps the key-list ranges of the citations among them."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.slots: list[tuple[int, int]] = []

    def add(self, text: str, slots: tuple[tuple[int, int], ...] = ()) -> None:
        self.slots.extend((self.size + s, self.size + e) for s, e in slots)
        self.parts.append(text)
        self.size += len(text)

    def text(self) -> str:
        return "".join(self.parts)


def _placeholder_first_keys(draw: st.DrawFn, placeholders: list[str] = PLACEHOLDER_KEYS) -> list[str]:
    """One to three keys; the first option (what shrinking reaches) is a lone placeholder."""
    first = draw(
        st.one_of(st.sampled_from(placeholders), st.sampled_from(placeholders), st.sampled_from(REAL_KEYS))
    )
    more = draw(st.lists(st.sampled_from(REAL_KEYS + placeholders), max_size=2))
    keys = [first, *more]
    return keys[::-1] if draw(st.booleans()) else keys


@st.composite
def latex_citations(draw: st.DrawFn) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A LaTeX citation and the ``[start, end]`` of its key lists (inside the braces)."""
    form = draw(st.sampled_from(["cite", "cite", "cite", "typing", "multi", "todo"]))
    if form == "todo":  # apacite's to-do marker: the whole \cite<> is the slot
        return "\\cite<>", ((6, 7),)
    sep = draw(st.sampled_from([",", ", ", " , ", ",\n  "]))
    if form == "multi":
        text, slots = (
            draw(st.sampled_from(["\\cites", "\\parencites"])) + draw(st.sampled_from(["", "(pre)(post)"])),
            [],
        )
        for _ in range(draw(st.integers(1, 3))):
            text += draw(st.sampled_from(LATEX_OPTIONAL[:3])) + "{"
            start = len(text)
            text += sep.join(_placeholder_first_keys(draw)) + "}"
            slots.append((start, len(text) - 1))
        return text, tuple(slots)
    text = draw(st.sampled_from(LATEX_COMMANDS)) + draw(st.sampled_from(LATEX_OPTIONAL)) + "{"
    start = len(text)
    if form == "typing":  # \cite{smi with the closing brace not typed yet
        text += draw(st.sampled_from(["", "smi", "doe:20", "?"]))
        return text, ((start, len(text)),)
    text += sep.join(_placeholder_first_keys(draw)) + "}"
    return text, ((start, len(text) - 1),)


@st.composite
def markdown_citations(draw: st.DrawFn) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A Pandoc citation and the ``[start, end]`` of its key slots (keys, empty segments, a bare ``@``)."""
    form = draw(st.sampled_from(["bracket", "bracket", "intext", "bracket", "bracket", "bare"]))
    if form == "bare":  # "@" just typed
        return "@", ((1, 1),)
    if form == "intext":
        key = draw(st.sampled_from(["TODO", "{?}", "{TODO}", "smith2020deep", "doe:2019:abc", "{lee et al}"]))
        return "@" + key, ((2, len(key)) if key.startswith("{") else (1, 1 + len(key)),)
    sep = draw(st.sampled_from(["; ", ";", " ; "]))
    text, slots = "[", []
    for i, key in enumerate(_placeholder_first_keys(draw, MD_PLACEHOLDER_KEYS)):
        if i:
            text += sep
        before, after = draw(
            st.sampled_from([("@", ""), ("-@", ""), ("see @", ""), ("@", ", p. 3"), ("", "")])
        )
        if not before and key:
            before = "@"  # a bare word is no citation item
        text += before
        slots.append((len(text), len(text) + len(key)))
        text += key + after
    return text + "]", tuple(slots)


def _prose(draw: st.DrawFn) -> str:
    """A run of words (a slice of :data:`WORDS`: two draws rather than one per word, for speed)."""
    start = draw(st.integers(0, len(WORDS) - 1))
    words = WORDS[start : start + draw(st.integers(1, 8))]
    return " ".join(words) + draw(st.sampled_from(PUNCT))


def _latex_head(draw: st.DrawFn, b: _Builder) -> str | None:
    """Preamble with title and abstract; returns the bibliography line to put at the end (or None)."""
    if draw(st.booleans()):
        b.add("\\documentclass{article}\n")
    if draw(st.booleans()):
        b.add("\\title{" + _prose(draw).strip() + "}\n")
    if draw(st.booleans()):
        b.add("\\begin{abstract}\n" + _prose(draw) + "\n\\end{abstract}\n")
    if draw(st.booleans()):  # global_context follows it through read_file
        b.add("\\input{" + draw(st.sampled_from(INCLUDED)) + "}\n")
    bib = draw(_none_inside(LATEX_BIBS))
    if bib is not None and draw(st.booleans()):
        b.add(bib + "\n")  # biblatex declares it in the preamble
        return None
    return bib


def _markdown_head(draw: st.DrawFn, b: _Builder) -> None:
    """YAML front matter with a bibliography most of the time, a title and an abstract."""
    bib = draw(_none_inside(MD_BIBS))
    title = draw(st.sampled_from(["title: Deep ranking\n", "title: 'Clicks: a study'\n", ""]))
    abstract = draw(st.sampled_from(["abstract: |\n  We show that clicks are biased.\n", ""]))
    if bib is None and not title and not abstract:
        return
    lines = [title, bib or "", abstract]
    order = draw(st.permutations(range(3)))
    b.add("---\n" + "".join(lines[i] for i in order) + "---\n\n")


@st.composite
def drafts(draw: st.DrawFn, lang: Lang | None = None) -> Draft:
    """A LaTeX or Markdown draft; see the module docstring for what it contains and why."""
    lang = lang or draw(st.sampled_from(["latex", "markdown"]))
    b = _Builder()
    tail_bib = _latex_head(draw, b) if lang == "latex" else _markdown_head(draw, b)
    cites = latex_citations() if lang == "latex" else markdown_citations()
    kinds = draw(
        st.lists(
            st.sampled_from(["cite", "prose", "cite", "prose", "cite", "prose", "prose", "noise"]),
            max_size=10,
        )
    )
    kinds.insert(draw(st.integers(0, len(kinds))), "cite")  # at least one citation
    for kind in kinds:
        if kind == "cite":
            b.add(" ")  # a citation follows a blank, as in prose ("word \cite", "word [@")
            b.add(*draw(cites))
            b.add(draw(st.sampled_from(PUNCT)))
        elif kind == "prose":
            b.add(_prose(draw))
        else:
            b.add(draw(st.sampled_from(TOKENS)))
    if tail_bib is not None:
        b.add("\n" + tail_bib + "\n")
    text = b.text()
    start, end = draw(st.sampled_from(b.slots))  # never empty: there is at least one citation
    return Draft(lang, text, tuple(b.slots), draw(st.integers(start, end)))
