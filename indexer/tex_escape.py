"""Clean Unicode as TeX that pdfLaTeX, BibTeX and biber all accept (the BibTeX writer's fields).

Specials are escaped, accented letters become accent commands (classic BibTeX sorts and abbreviates
those correctly), Greek and math symbols ``$\\alpha$``, text symbols their LaTeX commands
(``\\textcopyright{}``). What has no pdfLaTeX spelling at all (CJK, Arabic, Cyrillic, emoji) stays
UTF-8: right for XeLaTeX, LuaLaTeX and biber, and never silently dropped. Source TeX from a bulk
export goes through :mod:`citewise.indexer.bibtex_tex` first.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

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
MATH_COMMANDS: dict[str, str] = {
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
MATH_LITERAL = frozenset("-|")  # entries of MATH_COMMANDS that are characters, not command names

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
    if (
        marks
        and not base.isascii()
        and (base in MATH_COMMANDS or base in _LETTERS or base in _GREEK_AS_LATIN)
    ):
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
    if ch in MATH_COMMANDS:
        cmd = MATH_COMMANDS[ch]
        if cmd in MATH_LITERAL:
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
