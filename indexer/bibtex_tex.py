"""Field values for inserted BibTeX entries: text that pdfLaTeX, BibTeX and biber all accept.

Two kinds of input reach the BibTeX writer:

* **Clean Unicode** (what every importer stores: ACL XML, JSON Lines, the cleaned columns of a
  BibTeX record). :func:`tex_escape` spells it in TeX: specials escaped, accented letters as
  accent commands (classic BibTeX sorts and abbreviates those correctly), Greek and math symbols
  as ``$\\alpha$``, text symbols as their LaTeX commands (``\\textcopyright{}``). What has no
  pdfLaTeX spelling at all (CJK, Arabic, Cyrillic, emoji) stays UTF-8: right for XeLaTeX,
  LuaLaTeX and biber, and never silently dropped.
* **Source TeX from a bulk export** (the original field text of an ACM Digital Library entry):
  TeX that is valid (``\\&``, ``{\\"u}``, ``$x^2$``, ``{{BERT}}``) mixed with web residue
  (``&amp;``, ``<sup>``, ``<i>``, MathML, stray ``&`` / ``%`` / ``_``, unknown or
  package-only commands, half-written math). :func:`source_to_tex` parses it into a small tree
  (text, groups, formatting commands, math) and writes that tree back with :func:`tex_escape`:
  valid TeX survives with its meaning (no double escaping, because escapes are decoded into text
  first), tags become ``\\textsuperscript{}`` / ``\\textit{}`` ..., math is kept only when it
  uses commands the LaTeX kernel defines and is well formed (else it becomes text), and braces
  are balanced by construction. Everything emitted is LaTeX-kernel TeX, so an entry needs no
  package in the user's preamble.

The scanners walk the text once (no regex with nested quantifiers over user text), so an
adversarial field cannot stall the language server.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass, field
from urllib.parse import quote

from .braces import BraceIndex
from .texclean import _SYMBOLS, match_accent, tex_to_unicode

# -- clean Unicode -> TeX ------------------------------------------------------------------------

_SPECIALS: dict[str, str] = {
    # Not \{ and \}: BibTeX counts those braces too, so a lone one unbalances the entry.
    "\\": r"\textbackslash{}",
    "{": r"\textbraceleft{}",
    "}": r"\textbraceright{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    # In OT1 (LaTeX's default font encoding) these print as ¡ ¿ and an em dash.
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "\u00a0": "~",
    "–": "--",
    "—": "---",
    "“": "``",
    "”": "''",
    "…": r"\ldots{}",
}

# Combining mark -> accent command (after NFD decomposition of a Latin letter).
_ACCENT_COMMANDS: dict[str, str] = {
    "\u0301": "'",
    "\u0300": "`",
    "\u0302": "^",
    "\u0308": '"',
    "\u0303": "~",
    "\u0304": "=",
    "\u0307": ".",
    "\u0306": "u",
    "\u030c": "v",
    "\u030b": "H",
    "\u0327": "c",
    "\u0328": "k",
    "\u030a": "r",
    "\u0323": "d",
    "\u0331": "b",
}

# Letters that are commands of their own. (ð þ đ ŋ exist in T1 only, as in LaTeX's own utf8.)
_LETTERS: dict[str, str] = {
    "ß": r"\ss",
    "ø": r"\o",
    "Ø": r"\O",
    "ł": r"\l",
    "Ł": r"\L",
    "æ": r"\ae",
    "Æ": r"\AE",
    "œ": r"\oe",
    "Œ": r"\OE",
    "å": r"\aa",
    "Å": r"\AA",
    "ı": r"\i",
    "ȷ": r"\j",
    "ð": r"\dh",
    "Ð": r"\DH",
    "þ": r"\th",
    "Þ": r"\TH",
    "đ": r"\dj",
    "Đ": r"\DJ",
    "ŋ": r"\ng",
    "Ŋ": r"\NG",
}

# Greek and math characters -> math-mode commands (all defined by the LaTeX kernel).
_MATH: dict[str, str] = {
    "α": "alpha",
    "β": "beta",
    "γ": "gamma",
    "δ": "delta",
    "ε": "varepsilon",
    "ζ": "zeta",
    "η": "eta",
    "θ": "theta",
    "ϑ": "vartheta",
    "ι": "iota",
    "κ": "kappa",
    "λ": "lambda",
    "μ": "mu",
    "ν": "nu",
    "ξ": "xi",
    "π": "pi",
    "ϖ": "varpi",
    "ρ": "rho",
    "ϱ": "varrho",
    "σ": "sigma",
    "ς": "varsigma",
    "τ": "tau",
    "υ": "upsilon",
    "φ": "phi",
    "ϕ": "varphi",
    "χ": "chi",
    "ψ": "psi",
    "ω": "omega",
    "Γ": "Gamma",
    "Δ": "Delta",
    "Θ": "Theta",
    "Λ": "Lambda",
    "Ξ": "Xi",
    "Π": "Pi",
    "Σ": "Sigma",
    "Υ": "Upsilon",
    "Φ": "Phi",
    "Ψ": "Psi",
    "Ω": "Omega",
    "ϵ": "epsilon",
    "µ": "mu",
    "≤": "leq",
    "≥": "geq",
    "≠": "neq",
    "≈": "approx",
    "∼": "sim",
    "∞": "infty",
    "±": "pm",
    "∓": "mp",
    "×": "times",
    "·": "cdot",
    "⋅": "cdot",
    "→": "rightarrow",
    "←": "leftarrow",
    "⇒": "Rightarrow",
    "⇔": "Leftrightarrow",
    "↔": "leftrightarrow",
    "↑": "uparrow",
    "↓": "downarrow",
    "∈": "in",
    "∉": "notin",
    "∋": "ni",
    "⊂": "subset",
    "⊆": "subseteq",
    "⊃": "supset",
    "⊇": "supseteq",
    "∪": "cup",
    "∩": "cap",
    "⋃": "bigcup",
    "⋂": "bigcap",
    "∑": "sum",
    "∏": "prod",
    "∫": "int",
    "∂": "partial",
    "∇": "nabla",
    "∀": "forall",
    "∃": "exists",
    "∅": "emptyset",
    "ℓ": "ell",
    "∘": "circ",
    "⋆": "star",
    "∗": "ast",
    "′": "prime",
    "⋯": "cdots",
    "−": "-",
    "√": "surd",
    "¬": "neg",
    "∧": "wedge",
    "∨": "vee",
    "≪": "ll",
    "≫": "gg",
    "≺": "prec",
    "≻": "succ",
    "≡": "equiv",
    "∝": "propto",
    "∥": "parallel",
    "‖": "|",
    "∣": "mid",
    "⊨": "models",
    "⊤": "top",
    "⊥": "perp",
    "∠": "angle",
    "⊕": "oplus",
    "⊗": "otimes",
    "⋈": "bowtie",
    "⌈": "lceil",
    "⌉": "rceil",
    "⌊": "lfloor",
    "⌋": "rfloor",
    "〈": "langle",
    "〉": "rangle",
    "⟨": "langle",
    "⟩": "rangle",
    "ℜ": "Re",
    "ℑ": "Im",
    "ℵ": "aleph",
    "♯": "sharp",
    "↦": "mapsto",
    "⊢": "vdash",
    "≃": "simeq",
    "≅": "cong",
    "≍": "asymp",
    "⊑": "sqsubseteq",
    "⊒": "sqsupseteq",
    "⊙": "odot",
    "÷": "div",
    "∖": "setminus",
    "⟹": "Longrightarrow",
    "⟶": "longrightarrow",
    "↝": "rightarrow",
}
_MATH_LITERAL = frozenset("-|")  # entries of _MATH that are characters, not command names

# Text symbols -> kernel text commands (textcomp is part of the kernel since 2020).
_TEXT_SYMBOLS: dict[str, str] = {
    "©": r"\textcopyright{}",
    "®": r"\textregistered{}",
    "™": r"\texttrademark{}",
    "°": r"\textdegree{}",
    "•": r"\textbullet{}",
    "§": r"{\S}",
    "¶": r"{\P}",
    "†": r"\dag{}",
    "‡": r"\ddag{}",
    "£": r"\pounds{}",
    "€": r"\texteuro{}",
    "¢": r"\textcent{}",
    "¥": r"\textyen{}",
    "₹": "Rs.",
    "½": r"\textonehalf{}",
    "¼": r"\textonequarter{}",
    "¾": r"\textthreequarters{}",
    "º": r"\textordmasculine{}",
    "ª": r"\textordfeminine{}",
    "«": "``",
    "»": "''",
    "‹": "`",
    "›": "'",  # (guillemets: T1 only)
    "‘": "`",
    "’": "'",
    "‚": ",",
    "„": ",,",
    "″": "''",
    "‐": "-",
    "‑": "-",
    "‒": "--",
    "―": "---",
    "\u202f": r"\,",
    "\u2009": r"\,",
    "\u2002": " ",
    "\u2003": " ",
    "\u2007": " ",
    "\u2008": " ",
    "\u205f": " ",
    "\u3000": " ",
    "\u00ad": r"\-",
    # Spacing accents: TS1 symbols (biber would turn \v{} into a lone combining caron).
    "´": r"\textasciiacute{}",
    "¨": r"\textasciidieresis{}",
    "¯": r"\textasciimacron{}",
    "ˇ": r"\textasciicaron{}",
    "˘": r"\textasciibreve{}",
    "˝": r"\textacutedbl{}",
    "˙": ".",
    "˚": r"\textdegree{}",
    "˜": r"\textasciitilde{}",
    "¸": ",",
    "¹": r"\textsuperscript{1}",
    "²": r"\textsuperscript{2}",
    "³": r"\textsuperscript{3}",
    "¿": r"?`",
    "¡": r"!`",
    "✓": r"$\surd$",
}

# Accented letters that survive every path to the page: LaTeX's UTF-8 tables know them (biber turns
# accent commands into UTF-8, and pdfLaTeX stops at a character it does not know), and they need
# no T1-only accent (the ogonek). Generated from TeX Live 2022's t1enc.dfu; one accent each.
_COMPOSABLE = frozenset(
    "ÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÑÒÓÔÕÖÙÚÛÜÝàáâãäåçèéêëìíîïñòóôõöùúû"
    "üýÿĀāĂăĆćĈĉĊċČčĎďĒēĔĕĖėĚěĜĝĞğĠġĢģĤĥĨĩĪīĬĭİĴĵĶķĹĺĻļ"
    "ĽľŃńŅņŇňŌōŎŏŐőŔŕŖŗŘřŚśŜŝŞşŠšŢţŤťŨũŪūŬŭŮůŰűŴŵŶŷŸŹźŻ"
    "żŽžǍǎǏǐǑǒǓǔǦǧǨǩǰǴǵȘșȚțȲȳḂḃḍḞḟḠḡḥḰḱḷṃṅṇṛṣṭẎẏẐẑỲỳ"
)

# Letters that exist in T1 only: in OT1, LaTeX's default encoding (llncs, IEEEtran), \dh is an error.
_OT1_FOLD = {"ð": "d", "Ð": "D", "þ": "th", "Þ": "Th", "đ": "d", "Đ": "D", "ŋ": "ng", "Ŋ": "Ng"}

# Greek capitals that look like Latin ones: LaTeX has no command for them (no \Alpha).
_GREEK_AS_LATIN = dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΧ", "ABEZHIKMNOPTX", strict=True)) | {"ο": "o"}

# Format and control characters: invisible in print, errors or garbage in TeX.
_INVISIBLE = frozenset("\u200b\u200c\u200d\u2060\ufeff\u200e\u200f")


def _accented(ch: str) -> str | None:
    """``é`` -> ``{\\'e}``, ``ç`` -> ``{\\c{c}}``; None when ``ch`` is not an accented letter.

    One accent, and only where the accented letter is in :data:`_COMPOSABLE`: biber writes accent
    commands back as UTF-8, and pdfLaTeX stops at a letter its tables lack (``ẹ``, ``ǖ``; nested
    accents come out half-converted). So ``ễ`` becomes ``{\\^e}``, ``ứ`` ``{\\'u}``, ``ą`` ``a``
    (no ogonek in OT1): an accent less, but an entry that builds. ``í`` is ``{\\'i}``, not the
    classic ``{\\'\\i}``, which biber turns into a dotless i and a combining accent.
    """
    decomposed = unicodedata.normalize("NFD", ch)
    base, marks = decomposed[0], decomposed[1:]
    if marks and not base.isascii() and (base in _MATH or base in _LETTERS or base in _GREEK_AS_LATIN):
        return char_to_tex(base)  # ά: Greek has no accents in the kernel's math; the letter stays
    if not marks or not (base.isascii() and base.isalpha()):
        return None
    for mark in marks:
        cmd = _ACCENT_COMMANDS.get(mark)
        if cmd is not None and unicodedata.normalize("NFC", base + mark) in _COMPOSABLE:
            return "{\\" + cmd + "{" + base + "}}" if cmd.isalpha() else "{\\" + cmd + base + "}"
    return base


def _unicode_math(ch: str) -> str | None:
    """``ℝ`` -> ``$\\mathbf{R}$``, ``𝒫`` -> ``$\\mathcal{P}$``, ``𝑄`` -> ``Q`` (styled letters folded)."""
    name = unicodedata.name(ch, "")
    folded = unicodedata.normalize("NFKC", ch)
    if len(folded) != 1 or not folded.isascii() or not folded.isalnum():
        return None
    if "DOUBLE-STRUCK" in name or "BOLD" in name:
        return "{$\\mathbf{" + folded + "}$}"
    if "SCRIPT" in name and folded.isupper():
        return "{$\\mathcal{" + folded + "}$}"
    return folded


def char_to_tex(ch: str) -> str:
    """One Unicode character in LaTeX-kernel TeX (UTF-8 itself when TeX has no spelling for it)."""
    if ch in _SPECIALS:
        return _SPECIALS[ch]
    if ch.isascii():
        if ch.isprintable() or ch == "\x00":  # (NUL: tex_escape's own ligature marker)
            return ch
        return " " if ch.isspace() else ""
    if ch in _OT1_FOLD:
        return _OT1_FOLD[ch]
    if ch in _LETTERS:
        return "{" + _LETTERS[ch] + "}"
    if ch in _MATH:
        cmd = _MATH[ch]
        if cmd in _MATH_LITERAL:
            return "$" + cmd + "$"
        # Braced when it has capitals: BibTeX's change.case$ would turn \Delta into \delta.
        return "{$\\" + cmd + "$}" if any(c.isupper() for c in cmd) else "$\\" + cmd + "$"
    if ch in _TEXT_SYMBOLS:
        return _TEXT_SYMBOLS[ch]
    if ch in _GREEK_AS_LATIN:
        return _GREEK_AS_LATIN[ch]
    if ch in _INVISIBLE or unicodedata.category(ch) in ("Cc", "Cs", "Co", "Cn", "Mn", "Me"):
        return ""  # (a combining mark left over after NFC has no letter TeX could put it on)
    if unicodedata.category(ch) == "Zs":
        return " "
    accented = _accented(ch)
    if accented is not None:
        return accented
    styled = _unicode_math(ch)
    if styled is not None:
        return styled
    folded = unicodedata.normalize("NFKC", ch)  # ligatures (ﬁ), full-width forms
    if folded != ch and folded.isascii():
        return "".join(char_to_tex(c) for c in folded)
    return ch  # no ASCII spelling: UTF-8 is read by XeLaTeX, LuaLaTeX and biber


_ASCII_TEX = {c: char_to_tex(chr(c)) for c in range(128)}
_ASCII_QUOTES = re.compile(r"(?<=-)-|(?<=`)`|(?<=')'")
_MATH_JOIN = re.compile(r"(?<!\\)\$\$")


def tex_escape(text: str) -> str:
    """Clean Unicode -> TeX that BibTeX and LaTeX read back as the same text."""
    text = unicodedata.normalize("NFC", text.replace("\x00", ""))
    # "--", "``" and "''" are ligatures in TeX; an empty group keeps literal ones literal.
    text = _ASCII_QUOTES.sub(lambda m: "\x00" + m.group(0), text)
    if text.isascii():  # the common case, at C speed
        tex = text.translate(_ASCII_TEX)
    else:
        tex = "".join(char_to_tex(ch) for ch in text)
    return _merge_math(tex.replace("\x00", "{}"))


def _merge_math(tex: str) -> str:
    """``$\\alpha$$\\leq$`` -> ``$\\alpha\\leq$``: in TeX ``$$`` would open display math."""
    return _MATH_JOIN.sub("", tex)


_WORD = re.compile(r"[^\W_]+")


def _needs_protection(word: str, at_start: bool) -> bool:
    """Capitals a style must keep: inner capitals (BERT, FastText, iPhone), a capital with digits
    (T5, 3D), or a lone capital (Part B, What I Learned)."""
    if any(c.isupper() for c in word[1:]):
        return True
    if word[0].isupper() and any(c.isdigit() for c in word):
        return True
    return len(word) == 1 and word.isupper() and not at_start


def tex_title(title: str, at_start: bool = True) -> str:
    """A title in TeX with braces around words whose capitalisation must survive the style.

    Greek capitals are braced too: BibTeX's ``change.case$`` would turn ``$\\Delta$`` into
    ``$\\delta$``. ``at_start``: the text begins the title (its first word may be lowered).
    """
    title = unicodedata.normalize("NFC", title)
    out: list[str] = []
    pos = 0
    for match in _WORD.finditer(title):
        out.append(tex_escape(title[pos : match.start()]))
        word = match.group(0)
        escaped = tex_escape(word)
        first = at_start and not title[: match.start()].strip()
        protect = _needs_protection(word, first) or ("$" in escaped and any(c.isupper() for c in escaped))
        out.append("{" + escaped + "}" if protect else escaped)
        pos = match.end()
    out.append(tex_escape(title[pos:]))
    return _merge_math("".join(out))


def tex_name(name: str) -> str:
    """One author name; a name containing a bare "and" is braced so it stays one person."""
    escaped = tex_escape(name)
    if re.search(r"\sand\s", name, re.I):
        return "{" + escaped + "}"
    return escaped


# -- identifiers -----------------------------------------------------------------------------------

_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def clean_verbatim(value: str) -> str:
    """A URL, DOI or other identifier as written, made safe for every toolchain.

    Kept verbatim because biblatex and ``\\url`` read these fields verbatim (``\\%`` would put a
    backslash into the link). What cannot be verbatim is encoded the way a URL encodes it:
    whitespace dropped, a ``%`` that is not already a percent-escape -> ``%25``, every ``#`` after
    the first (the fragment) -> ``%23``, ``\\``, braces and non-ASCII -> percent-escapes (braces
    would unbalance the entry, UTF-8 inside ``\\url`` stops pdfLaTeX).
    """
    value = "".join(value.split())
    out: list[str] = []
    seen_hash = False
    for i, ch in enumerate(value):
        if ch == "%" and not _PERCENT_ESCAPE.match(value, i):
            out.append("%25")
        elif ch == "#":
            out.append("%23" if seen_hash else "#")
            seen_hash = True
        elif ch in '\\{}"' or not ch.isascii() or not ch.isprintable():
            out.append(quote(ch, safe=""))
        else:
            out.append(ch)
    return "".join(out)


# -- source TeX (with web residue) -> TeX ----------------------------------------------------------

_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:._-]*)((?:\s[^<>]*)?)(/?)>")

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
        m = _TAG.match(self.s, i)
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


# -- math ----------------------------------------------------------------------------------------

# Math commands of the LaTeX kernel that take no argument.
_MATH_SYMBOLS = frozenset(
    set(_MATH.values()) - _MATH_LITERAL
    | set(
        "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi "
        "varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi "
        "Pi Sigma Upsilon Phi Psi Omega".split()
    )
    | set(
        "le ge ne leq geq neq to gets infty cdot cdots ldots dots vdots ddots times div pm mp log ln lg exp "
        "sin cos tan min max sup inf lim liminf limsup arg det dim ker Pr bmod pmod gcd deg hom "
        "sum prod int oint bigcup bigcap bigvee bigwedge bigoplus bigotimes coprod langle rangle lceil "
        "rceil lfloor rfloor backslash prime emptyset nabla partial forall exists neg lnot land lor "
        "wedge vee cap cup setminus subset subseteq supset supseteq in ni notin sim simeq approx cong "
        "equiv propto perp parallel mid ll gg prec succ preceq succeq leftarrow rightarrow "
        "Leftarrow Rightarrow leftrightarrow Leftrightarrow uparrow downarrow mapsto longrightarrow "
        "Longrightarrow iff star ast circ bullet oplus otimes odot triangle triangleleft "
        "triangleright bigtriangleup bigtriangledown top bot vdash dashv models ell hbar Re Im aleph wp "
        "surd angle flat sharp natural clubsuit diamondsuit heartsuit spadesuit dagger ddagger amalg "
        "uplus sqcup sqcap sqsubseteq sqsupseteq bowtie smile frown doteq asymp colon quad qquad "
        "imath jmath cdotp ldotp".split()
    )
)
_MATH_ARG1: dict[str, str] = {
    **{
        c: c
        for c in (
            "hat",
            "tilde",
            "bar",
            "vec",
            "dot",
            "ddot",
            "acute",
            "grave",
            "check",
            "breve",
            "widehat",
            "widetilde",
            "overline",
            "underline",
            "mathrm",
            "mathbf",
            "mathit",
            "mathcal",
            "mathsf",
            "mathtt",
            "sqrt",
            "mbox",
        )
    },
    "mathbb": "mathbf",
    "bm": "mathbf",
    "boldsymbol": "mathbf",
    "text": "mathrm",
    "textrm": "mathrm",
    "textit": "mathit",
    "textbf": "mathbf",
    "operatorname": "mathrm",
    "mathscr": "mathcal",
    "mathfrak": "mathrm",
    "textsf": "mathsf",
    "texttt": "mathtt",
}
_MATH_ARG2 = frozenset({"frac"})
_MATH_ALIASES = {
    "eps": "epsilon",
    "implies": "Longrightarrow",
    "mod": "bmod",
    "Join": "bowtie",
    "leqslant": "leq",
    "geqslant": "geq",
    "rhd": "triangleright",
    "lhd": "triangleleft",
    "lvert": "|",
    "rvert": "|",
    "vert": "|",
    "Vert": "|",
    "dfrac": "frac",
    "tfrac": "frac",
    "varnothing": "emptyset",
    "lbrace": "{",
    "rbrace": "}",
}
_MATH_DROPPED = frozenset(
    "left right bigl bigr Bigl Bigr biggl biggr big Big displaystyle textstyle "
    "scriptstyle limits nolimits".split()
)
_MATH_PLAIN = frozenset("+-=<>()[]/,.;:!'*|?@ ")
_MAX_MATH = 2000
_MAX_MATH_DEPTH = 40


class _MathError(Exception):
    """The formula is not kernel math (or not well formed): it becomes text instead."""


def clean_math(content: str) -> str | None:
    """Inline math made safe for the LaTeX kernel, or None when it cannot be (then use its text).

    Kept: letters, digits, operators, kernel math commands with their arguments, ``^``/``_`` with an
    operand, balanced braces. Renamed: commands from amssymb & co. to kernel ones (``\\mathbb`` ->
    ``\\mathbf``, ``\\leqslant`` -> ``\\leq``). Dropped: ``\\left``/``\\right`` sizing. Rejected:
    unknown commands, double scripts, ``\\frac`` without two arguments, HTML, display math.
    """
    if len(content) > _MAX_MATH or "<" in content and _TAG.search(content):
        return None
    try:
        out, pos = _math_run(content.replace("\n", " "), 0, 0)
    except _MathError:
        return None
    if pos != len(content) or not out.strip():
        return None
    return out.strip()


def _math_run(s: str, pos: int, depth: int) -> tuple[str, int]:
    """Math tokens from ``pos`` up to an unmatched ``}`` or the end: (normalised TeX, end index)."""
    if depth > _MAX_MATH_DEPTH:
        raise _MathError
    out: list[str] = []
    scripts: set[str] = set()  # ^ and _ already attached to the current atom
    n = len(s)
    while pos < n:
        c = s[pos]
        if c == "}":
            return "".join(out), pos
        if c in "^_":
            if c in scripts:
                raise _MathError  # "Double superscript"
            scripts.add(c)
            operand, pos = _math_operand(s, pos + 1, depth)
            out.append(c + operand)
            continue
        atom, pos = _math_atom(s, pos, depth)
        if atom.strip():
            scripts = set()
        out.append(atom)
    return "".join(out), pos


def _math_operand(s: str, pos: int, depth: int) -> tuple[str, int]:
    """One argument: a braced group, a single character or an argument-less command."""
    n = len(s)
    while pos < n and s[pos] == " ":
        pos += 1
    if pos >= n or s[pos] in "}^_$&#%":
        raise _MathError
    if s[pos] == "{":
        inner, end = _math_run(s, pos + 1, depth + 1)
        if end >= n:
            raise _MathError
        return "{" + inner + "}", end + 1
    atom, end = _math_atom(s, pos, depth)
    if atom.startswith("\\") and "{" in atom[2:]:  # x^\hat{a}: a command with arguments needs braces
        raise _MathError
    return atom, end


def _math_atom(s: str, pos: int, depth: int) -> tuple[str, int]:
    c = s[pos]
    if c == "{":
        inner, end = _math_run(s, pos + 1, depth + 1)
        if end >= len(s):
            raise _MathError
        return "{" + inner + "}", end + 1
    if c == "\\":
        return _math_command(s, pos, depth)
    if c.isascii() and (c.isalnum() or c in _MATH_PLAIN):
        return c, pos + 1
    if c == "~":
        return "~", pos + 1
    if c in "&#%":
        return "\\" + c, pos + 1
    if c in _MATH:
        cmd = _MATH[c]
        return (cmd if cmd in _MATH_LITERAL else "\\" + cmd + " "), pos + 1
    raise _MathError


def _math_command(s: str, pos: int, depth: int) -> tuple[str, int]:
    n = len(s)
    j = pos + 1
    if j >= n:
        raise _MathError
    if not (s[j].isascii() and s[j].isalpha()):
        if s[j] in "{}":  # \lbrace: BibTeX would count the brace of \{
            return ("\\lbrace " if s[j] == "{" else "\\rbrace "), j + 1
        if s[j] in "|,;:! %&#$_":
            return "\\" + s[j], j + 1
        if s[j] == "\\":
            return " ", j + 1
        raise _MathError
    k = j
    while k < n and s[k].isascii() and s[k].isalpha():
        k += 1
    name = _MATH_ALIASES.get(s[j:k], s[j:k])
    if name in ("|", "{", "}"):
        return {"|": "|", "{": "\\lbrace ", "}": "\\rbrace "}[name], k
    if name in _MATH_DROPPED:
        return "", k
    if name in _MATH_SYMBOLS:
        return "\\" + name + " ", k
    if name in _MATH_ARG1 or name in _MATH_ARG2:
        cmd = _MATH_ARG1.get(name, name)
        opt = ""
        if cmd == "sqrt" and k < n and s[k] == "[":
            close = s.find("]", k)
            if close == -1 or not s[k + 1 : close].isalnum():
                raise _MathError
            opt, k = s[k : close + 1], close + 1
        args = []
        for _ in range(2 if name in _MATH_ARG2 else 1):
            arg, k = _math_operand(s, k, depth)
            args.append(arg if arg.startswith("{") else "{" + arg.strip() + "}")
        return "\\" + cmd + opt + "".join(args), k
    raise _MathError


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
