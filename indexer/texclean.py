"""TeX and HTML markup to clean Unicode, for search and display.

Real exports are messy: ACM's BibTeX carries ``{\\'e}``, ``\\"{o}``, ``{{Braces}}``, ``<sup>``
tags and ``$\\alpha$``. Search needs plain words and people need readable titles, so every
importer passes its text through :func:`tex_to_unicode` / :func:`strip_html`. The original
BibTeX text is kept separately, so nothing a user wrote is lost.

Written as a handful of precompiled regexes rather than a full TeX parser: it runs on every
field of 110k records at import time and must stay fast.
"""

from __future__ import annotations

import html
import re
import unicodedata

# Accent commands -> combining characters.
_ACCENTS = {
    "'": "\u0301",
    "`": "\u0300",
    "^": "\u0302",
    '"': "\u0308",
    "~": "\u0303",
    "=": "\u0304",
    ".": "\u0307",
    "u": "\u0306",
    "v": "\u030c",
    "H": "\u030b",
    "c": "\u0327",
    "k": "\u0328",
    "r": "\u030a",
    "b": "\u0331",
    "d": "\u0323",
    "t": "\u0361",
}

# Commands that stand for one character.
_SYMBOLS = {
    "ss": "ß",
    "o": "ø",
    "O": "Ø",
    "l": "ł",
    "L": "Ł",
    "ae": "æ",
    "AE": "Æ",
    "oe": "œ",
    "OE": "Œ",
    "aa": "å",
    "AA": "Å",
    "i": "ı",
    "j": "ȷ",
    "dh": "ð",
    "DH": "Ð",
    "dj": "đ",
    "DJ": "Đ",
    "th": "þ",
    "TH": "Þ",
    "ng": "ŋ",
    "NG": "Ŋ",
    "texttimes": "×",
    "times": "×",
    "textendash": "–",
    "textemdash": "—",
    "textquoteleft": "‘",
    "textquoteright": "’",
    "textquotedblleft": "“",
    "textquotedblright": "”",
    "textregistered": "®",
    "texttrademark": "™",
    "textcopyright": "©",
    "textdegree": "°",
    "S": "§",
    "P": "¶",
    "dag": "†",
    "ddag": "‡",
    "textbullet": "•",
    "ldots": "…",
    "dots": "…",
    "cdots": "⋯",
    "textellipsis": "…",
    "euro": "€",
    "pounds": "£",
    "textasciitilde": "\ue003",
    "textbackslash": "\\",
    "textunderscore": "_",
    "textasciicircum": "^",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "neq": "≠",
    "ne": "≠",
    "approx": "≈",
    "sim": "∼",
    "infty": "∞",
    "pm": "±",
    "mp": "∓",
    "cdot": "·",
    "rightarrow": "→",
    "to": "→",
    "leftarrow": "←",
    "Rightarrow": "⇒",
    "leftrightarrow": "↔",
    "in": "∈",
    "notin": "∉",
    "subset": "⊂",
    "subseteq": "⊆",
    "cup": "∪",
    "cap": "∩",
    "sum": "∑",
    "prod": "∏",
    "int": "∫",
    "partial": "∂",
    "nabla": "∇",
    "forall": "∀",
    "exists": "∃",
    "emptyset": "∅",
    "ell": "ℓ",
    "circ": "∘",
    "star": "⋆",
    "ast": "∗",
    "mid": "|",
    "prime": "′",
    "qquad": " ",
    "quad": " ",
    "space": " ",
    "textbar": "|",
    "textless": "<",
    "textgreater": ">",
    # Literal braces, as the BibTeX writer spells them (BibTeX counts the brace in "\{" too);
    # placeholders, like escaped braces, so that brace stripping below keeps them.
    "textbraceleft": "\ue001",
    "textbraceright": "\ue002",
    "lbrace": "\ue001",
    "rbrace": "\ue002",
}

_GREEK = (
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi "
    "varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi "
    "Sigma Upsilon Phi Psi Omega"
).split()
_GREEK_CHARS = ("α β γ δ ε ε ζ η θ ϑ ι κ λ μ ν ξ π ϖ ρ ϱ σ ς τ υ φ ϕ χ ψ ω Γ Δ Θ Λ Ξ Π Σ Υ Φ Ψ Ω").split()
_SYMBOLS.update(zip(_GREEK, _GREEK_CHARS, strict=True))
_SYMBOLS["eps"] = "ε"

# \'e  \'{e}  {\'e}  \'{\i}  \" o  \c{c}  \v{s}
# (A braced argument may also be one non-ASCII letter: the outer accent of ``\^{\d{e}}`` once the
# inner one is decoded, which is how nested accents -- Vietnamese, pinyin -- are written.)
_ACCENT_RE = re.compile(
    r"\\([`'^\"~=.])\s*(?:\{\s*(\\?[A-Za-z]|[^\x00-\x7f{}\\\s])\s*\}|(\\?[A-Za-z]))"
    r"|\\([uvHckrbdt])(?:\s*\{\s*(\\?[A-Za-z]|[^\x00-\x7f{}\\\s])\s*\}|\s+(\\?[A-Za-z]))"
)
_ESCAPED_RE = re.compile(r"\\([&%$#_{}])")
_COMMAND_RE = re.compile(r"\\([A-Za-z]+)\*?\s?")
_STYLE_RE = re.compile(
    r"\\(?:textbf|textit|emph|textsc|texttt|textrm|textsf|textup|textsl|mathrm|mathbf|mathit|mathcal|"
    r"mathbb|mathsf|mathtt|boldsymbol|bm|text|mbox|hbox|url|href\{[^{}]*\}|ensuremath|NoCaseChange|"
    r"MakeUppercase|MakeLowercase|uppercase|lowercase)\s*\{"
)
# ``\textsuperscript{2}`` is how the BibTeX writer spells "²" (indexer/tex_escape.py): read back as
# the Unicode character when there is one for every character of the argument, else as its text.
_SCRIPT_RE = re.compile(r"\\text(super|sub)script\s*\{([^{}\\]{1,20})\}")
_SCRIPTS = {
    "super": str.maketrans("0123456789+-=()in", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁱⁿ"),
    "sub": str.maketrans("0123456789+-=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎"),
}
_OLD_STYLE_RE = re.compile(
    r"\{\\(?:bf|it|em|sc|tt|rm|sf|sl|cal|small|large|Large|scriptsize|footnotesize)\s+"
)
# (One ``\s``, not ``\s+``: ``\s+[^<>]*`` overlap, which made ``<a`` + 100k spaces quadratic.)
_HTML_TAG_RE = re.compile(r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?>")
_WS_RE = re.compile(r"\s+")


def _accent(match: re.Match[str]) -> str:
    cmd = match.group(1) or match.group(4)
    base = match.group(2) or match.group(3) or match.group(5) or match.group(6) or ""
    if base.startswith("\\"):
        base = _SYMBOLS.get(base[1:], base[1:])
        if base == "ı":
            base = "i"
        elif base == "ȷ":
            base = "j"
    return unicodedata.normalize("NFC", base + _ACCENTS[cmd])


def _script(match: re.Match[str]) -> str:
    kind, arg = match.group(1), match.group(2)
    table = _SCRIPTS[kind]
    return arg.translate(table) if all(ord(c) in table for c in arg) else arg


def _command(match: re.Match[str]) -> str:
    name = match.group(1)
    if name in _SYMBOLS:
        return _SYMBOLS[name]
    # Unknown command (\log, \frac, \cite...): keep its name as a word, drop the backslash.
    return name + " "


def match_accent(text: str, pos: int) -> tuple[str, int] | None:
    """The letter an accent command at ``pos`` writes (``\\'e``, ``\\c{c}``, ``\\'\\i``) and where
    the command ends, or None: for scanners that walk TeX themselves (the BibTeX writer)."""
    match = _ACCENT_RE.match(text, pos)
    return (_accent(match), match.end()) if match else None


def strip_html(text: str) -> str:
    """HTML/XML tags removed and entities decoded (``<sup>2</sup>`` -> ``2``, ``&amp;`` -> ``&``)."""
    if "<" in text:
        text = _HTML_TAG_RE.sub("", text)
    if "&" in text:
        text = html.unescape(text)
        if "<" in text:  # entity-escaped tags (&lt;sup&gt;) exist in real exports too
            text = _HTML_TAG_RE.sub("", text)
    return text


def tex_to_unicode(text: str) -> str:
    """Readable Unicode from a BibTeX field value: accents, symbols, math, braces, HTML, whitespace."""
    if not text:
        return ""
    text = strip_html(text)
    if "\\" in text:
        text = _ACCENT_RE.sub(_accent, text)
        if "\\" in text:  # nested accents: the inner one is decoded by now
            text = _ACCENT_RE.sub(_accent, text)
        # Escaped $ { } survive the math and brace stripping below as private-use placeholders.
        text = (
            text.replace("\\\\", "\n")
            .replace("\\$", "\ue000")
            .replace("\\{", "\ue001")
            .replace("\\}", "\ue002")
        )
        text = _ESCAPED_RE.sub(r"\1", text)
        if "script" in text:
            text = _SCRIPT_RE.sub(_script, text)
        text = _STYLE_RE.sub("{", text)
        text = _OLD_STYLE_RE.sub("{", text)
        text = _COMMAND_RE.sub(_command, text)
    if "--" in text:
        text = text.replace("---", "—").replace("--", "–")
    if "$" in text:
        text = text.replace("$", "")
    # Quote ligatures before braces go: ``{'}{'}`` is two apostrophes, not a closing quote.
    text = text.replace("``", "“").replace("''", "”")
    if "{" in text or "}" in text:
        text = text.replace("{", "").replace("}", "")
    if "~" in text:
        text = text.replace("~", " ")
    if "\ue000" in text or "\ue001" in text or "\ue002" in text or "\ue003" in text:
        text = (
            text.replace("\ue000", "$").replace("\ue001", "{").replace("\ue002", "}").replace("\ue003", "~")
        )
    return _WS_RE.sub(" ", text).strip()


def clean_text(text: str) -> str:
    """Markup-free text with collapsed whitespace (for sources that carry HTML but not TeX)."""
    return _WS_RE.sub(" ", strip_html(text or "")).strip()
