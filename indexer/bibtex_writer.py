"""The BibTeX entry citewise inserts into a user's ``.bib`` when they accept a recommendation.

Two cases:

* The paper came from BibTeX (``paper.bibtex`` is set): the user's own text is returned
  unchanged, with its own key. Their library is the authority (Better BibTeX keys, hand-fixed
  capitalisation...); we never "improve" it. If that key clashes with ``existing_keys`` it is
  still the key: the caller decides whether the entry is already there.
* Otherwise a clean entry is built from the record, with a key made by :func:`make_key`.

Text is turned into TeX by :func:`tex_escape`: TeX specials are escaped, accented Latin letters
become accent commands (``{\\'e}``: classic BibTeX sorts and abbreviates those correctly), Greek
and common math symbols become ``$\\alpha$`` (pdfLaTeX cannot typeset a raw ``α``), and anything
else stays UTF-8, which every current LaTeX reads. Titles get braces around words whose
capitals a bibliography style must not lowercase (``{BERT}``, ``{FastText}``).

Key styles (``key_style``) are templates; these tokens are replaced, anything else from
``[A-Za-z0-9_:.-]`` is kept literally:

=============  ==========================================================================
``lastname``   first author's last name, ASCII-folded, lower case (``Lastname``: capitalised)
``authors``    ACL style: ``smith`` / ``smith-jones`` / ``smith-etal``
``year``       four-digit year (``YEAR`` is the same); ``yy``: two digits
``firstword``  first title word that is not a stopword, lower case (``Firstword``: capitalised)
=============  ==========================================================================

Named styles: ``"lastnameYEARfirstword"`` (default, Google Scholar's ``smith2020deep``),
``"authoryear"`` = ``lastnameYEAR``, ``"lastname_year"``, ``"acl"`` = ``authors-year-firstword``
(the ACL Anthology's own keys). A key is made unique against ``existing_keys`` (compared case-
insensitively, as BibTeX does) by appending ``a``, ``b``, ... ``z``, ``aa``, ``ab``...
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Set

from .records import PaperRecord

NAMED_STYLES: dict[str, str] = {
    "authoryear": "lastnameYEAR",
    "google": "lastnameYEARfirstword",
    "acl": "authors-year-firstword",
}
DEFAULT_STYLE = "lastnameYEARfirstword"

# Function words, which never tell papers apart (content words like "Only" or "More" are kept).
STOPWORDS = frozenset(
    "a an the and or but nor of on in at to for from by with without into onto over under about "
    "as is are was were be been being do does did can could should would will shall may might must "
    "its it this that these those there their his her our your my we you they he she i not no "
    "via vs versus toward towards than then so what which who whom whose when where why how "
    "le la les el los las der die das".split()
)

ENTRY_TYPES = frozenset({
    "article", "book", "booklet", "inbook", "incollection", "inproceedings", "conference", "manual",
    "mastersthesis", "misc", "phdthesis", "proceedings", "techreport", "unpublished", "online",
    "report", "thesis", "dataset", "software",
})

# Which field carries ``paper.venue`` for each entry type.
VENUE_FIELD: dict[str, str] = {
    "article": "journal", "inproceedings": "booktitle", "conference": "booktitle",
    "incollection": "booktitle", "inbook": "booktitle", "proceedings": "booktitle",
    "phdthesis": "school", "mastersthesis": "school", "thesis": "school",
    "techreport": "institution", "report": "institution",
}

# Preferred order of ``extra`` fields; the rest follow alphabetically.
EXTRA_ORDER = ("editor", "volume", "number", "pages", "publisher", "address", "month", "series",
               "edition", "isbn", "issn", "note", "url")

# Fields written verbatim (identifiers and addresses: escaping would corrupt them).
VERBATIM_FIELDS = frozenset({"doi", "url", "eprint", "isbn", "issn"})

# ``extra`` keys that are citewise bookkeeping, not BibTeX fields.
INTERNAL_EXTRA = frozenset({"bibtex_key", "id"})

# Fields written from the record's columns; an ``extra`` copy would make a duplicate field.
FIRST_CLASS_FIELDS = ("author", "title", "year", "doi", "eprint", "archiveprefix", "keywords", "abstract")

MONTH_MACROS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")

# -- TeX escaping ---------------------------------------------------------------------------------

_SPECIALS: dict[str, str] = {
    "\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "&": r"\&", "%": r"\%", "$": r"\$",
    "#": r"\#", "_": r"\_", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "\u00a0": "~", "–": "--", "—": "---", "“": "``", "”": "''", "…": r"\ldots{}",
}

# Combining mark -> accent command (after NFD decomposition of a Latin letter).
_ACCENT_COMMANDS: dict[str, str] = {
    "\u0301": "'", "\u0300": "`", "\u0302": "^", "\u0308": '"', "\u0303": "~", "\u0304": "=",
    "\u0307": ".", "\u0306": "u", "\u030c": "v", "\u030b": "H", "\u0327": "c", "\u0328": "k",
    "\u030a": "r", "\u0323": "d", "\u0331": "b",
}

# Letters that are commands of their own.
_LETTERS: dict[str, str] = {
    "ß": r"\ss", "ø": r"\o", "Ø": r"\O", "ł": r"\l", "Ł": r"\L", "æ": r"\ae", "Æ": r"\AE",
    "œ": r"\oe", "Œ": r"\OE", "å": r"\aa", "Å": r"\AA", "ı": r"\i", "ð": r"\dh", "Ð": r"\DH",
    "þ": r"\th", "Þ": r"\TH", "đ": r"\dj", "Đ": r"\DJ", "ŋ": r"\ng", "Ŋ": r"\NG",
}

# Greek and math characters -> math-mode commands.
_MATH: dict[str, str] = {
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "varepsilon", "ζ": "zeta", "η": "eta",
    "θ": "theta", "ϑ": "vartheta", "ι": "iota", "κ": "kappa", "λ": "lambda", "μ": "mu", "ν": "nu",
    "ξ": "xi", "π": "pi", "ϖ": "varpi", "ρ": "rho", "ϱ": "varrho", "σ": "sigma", "ς": "varsigma",
    "τ": "tau", "υ": "upsilon", "φ": "phi", "ϕ": "varphi", "χ": "chi", "ψ": "psi", "ω": "omega",
    "Γ": "Gamma", "Δ": "Delta", "Θ": "Theta", "Λ": "Lambda", "Ξ": "Xi", "Π": "Pi", "Σ": "Sigma",
    "Υ": "Upsilon", "Φ": "Phi", "Ψ": "Psi", "Ω": "Omega",
    "≤": "leq", "≥": "geq", "≠": "neq", "≈": "approx", "∼": "sim", "∞": "infty", "±": "pm",
    "∓": "mp", "×": "times", "·": "cdot", "→": "rightarrow", "←": "leftarrow", "⇒": "Rightarrow",
    "↔": "leftrightarrow", "∈": "in", "∉": "notin", "⊂": "subset", "⊆": "subseteq", "∪": "cup",
    "∩": "cap", "∑": "sum", "∏": "prod", "∫": "int", "∂": "partial", "∇": "nabla", "∀": "forall",
    "∃": "exists", "∅": "emptyset", "ℓ": "ell", "∘": "circ", "⋆": "star", "∗": "ast", "′": "prime",
    "⋯": "cdots",
}


def _char_to_tex(ch: str) -> str:
    if ch in _SPECIALS:
        return _SPECIALS[ch]
    if ch.isascii():
        return ch
    if ch in _LETTERS:
        return "{" + _LETTERS[ch] + "}"
    if ch in _MATH:
        return "$\\" + _MATH[ch] + "$"
    decomposed = unicodedata.normalize("NFD", ch)
    if len(decomposed) == 2 and decomposed[0].isascii() and decomposed[0].isalpha():
        cmd = _ACCENT_COMMANDS.get(decomposed[1])
        if cmd is not None:
            base = decomposed[0]
            if base in "ij" and cmd not in "cdbk":  # accents over i and j replace the dot
                base = "\\" + base
            if cmd.isalpha():
                return "{\\" + cmd + "{" + base + "}}"
            return "{\\" + cmd + base + "}"
    return ch  # no ASCII spelling: UTF-8 is read by every current LaTeX and biber


_ASCII_QUOTES = re.compile(r"(?<=-)-|(?<=`)`|(?<=')'")


def tex_escape(text: str) -> str:
    """Clean Unicode -> TeX that BibTeX and LaTeX read back as the same text."""
    text = unicodedata.normalize("NFC", text.replace("\x00", ""))
    # "--", "``" and "''" are ligatures in TeX; an empty group keeps literal ones literal.
    text = _ASCII_QUOTES.sub(lambda m: "\x00" + m.group(0), text)
    return _merge_math("".join(_char_to_tex(ch) for ch in text).replace("\x00", "{}"))


_MATH_JOIN = re.compile(r"(?<!\\)\$\$")


def _merge_math(tex: str) -> str:
    """``$\\alpha$$\\leq$`` -> ``$\\alpha\\leq$``: in TeX ``$$`` would open display math."""
    return _MATH_JOIN.sub("", tex)


# -- titles ---------------------------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+")


def _needs_protection(word: str, at_start: bool) -> bool:
    """Capitals a style must keep: inner capitals (BERT, FastText, iPhone), a capital with digits
    (T5, 3D), or a lone capital (Part B, What I Learned)."""
    if any(c.isupper() for c in word[1:]):
        return True
    if word[0].isupper() and any(c.isdigit() for c in word):
        return True
    return len(word) == 1 and word.isupper() and not at_start


def tex_title(title: str) -> str:
    """A title in TeX with braces around words whose capitalisation must survive the style."""
    title = unicodedata.normalize("NFC", title)
    out: list[str] = []
    pos = 0
    for match in _WORD.finditer(title):
        out.append(tex_escape(title[pos : match.start()]))
        word = match.group(0)
        escaped = tex_escape(word)
        at_start = not title[: match.start()].strip()
        out.append("{" + escaped + "}" if _needs_protection(word, at_start) else escaped)
        pos = match.end()
    out.append(tex_escape(title[pos:]))
    return _merge_math("".join(out))


def tex_name(name: str) -> str:
    """One author name; a name containing a bare "and" is braced so it stays one person."""
    escaped = tex_escape(name)
    if re.search(r"\sand\s", name, re.I):
        return "{" + escaped + "}"
    return escaped


def _verbatim(value: str) -> str:
    """Identifiers and URLs go in as they are; only braces (which would unbalance) are dropped."""
    return value.replace("{", "").replace("}", "").replace("\n", " ").strip()


# -- keys -----------------------------------------------------------------------------------------


def ascii_fold(text: str) -> str:
    """"Müller-Łukasz" -> "Muller-Lukasz": accents stripped, special letters spelled out (ß -> ss)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c if c.isascii() else _LETTERS.get(c, "").lstrip("\\") for c in decomposed)


def last_name(author: str) -> str:
    """Last name of "Last, First" (or of "First Last": its last word, particles kept off)."""
    author = author.strip()
    if "," in author:
        return author.split(",", 1)[0].strip()
    parts = author.split()
    return parts[-1] if parts else ""


def _key_part(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", ascii_fold(text).lower())


def first_word(title: str) -> str:
    """First title word that is not a stopword, lower case ASCII (``""`` if none)."""
    words = [_key_part(w) for w in _WORD.findall(title)]
    words = [w for w in words if w]
    for word in words:
        if word not in STOPWORDS:
            return word
    return words[0] if words else ""


def _authors_part(paper: PaperRecord) -> str:
    names = [_key_part(last_name(a)) for a in paper.authors]
    names = [n for n in names if n]
    if not names:
        return "anon"
    if len(names) == 1:
        return names[0]
    if len(names) == 2:
        return f"{names[0]}-{names[1]}"
    return f"{names[0]}-etal"


_TOKEN = re.compile(r"Lastname|lastname|LASTNAME|authors|YEAR|year|yy|Firstword|firstword|FIRSTWORD")


def _render_style(paper: PaperRecord, style: str) -> str:
    style = NAMED_STYLES.get(style, style)
    lastname = next((p for p in (_key_part(last_name(a)) for a in paper.authors) if p), "") or "anon"
    word = first_word(paper.title)
    year = str(paper.year) if paper.year else ""
    values = {
        "lastname": lastname, "Lastname": lastname.capitalize(), "LASTNAME": lastname.upper(),
        "authors": _authors_part(paper), "YEAR": year, "year": year, "yy": year[-2:],
        "firstword": word, "Firstword": word.capitalize(), "FIRSTWORD": word.upper(),
    }
    out: list[str] = []
    pos = 0
    for match in _TOKEN.finditer(style):
        out.append(style[pos : match.start()])
        out.append(values[match.group(0)])
        pos = match.end()
    out.append(style[pos:])
    key = re.sub(r"[^A-Za-z0-9_:.\-]", "", "".join(out))
    key = re.sub(r"([-_:.])\1+", r"\1", key).strip("-_:.")  # separators around empty parts
    return key or "paper"


def _suffix(n: int) -> str:
    """0 -> "a", 25 -> "z", 26 -> "aa" (bijective base 26)."""
    out = ""
    n += 1
    while n:
        n, rem = divmod(n - 1, 26)
        out = chr(ord("a") + rem) + out
    return out


def unique_key(key: str, existing_keys: Iterable[str]) -> str:
    """``key`` or ``key`` + a, b, ... so that it clashes with none of ``existing_keys``."""
    taken = {k.lower() for k in existing_keys}
    if key.lower() not in taken:
        return key
    n = 0
    while f"{key}{_suffix(n)}".lower() in taken:
        n += 1
    return f"{key}{_suffix(n)}"


def make_key(
    paper: PaperRecord, existing_keys: Set[str] = frozenset(), style: str = DEFAULT_STYLE
) -> str:
    """A citation key for ``paper`` in ``style``, unique against ``existing_keys``.

    A key the paper's source chose (JSONL ``bibtex_key``) wins over the style: users picked it.
    """
    preferred = (paper.extra or {}).get("bibtex_key", "").strip()
    if preferred and re.fullmatch(r"[^\s,{}()\"#%'=\\~]+", preferred):
        return unique_key(preferred, existing_keys)
    return unique_key(_render_style(paper, style), existing_keys)


_ORIGINAL_KEY = re.compile(r"@\s*[A-Za-z]+\s*[{(]\s*([^,\s]+)\s*,")


def original_key(bibtex: str) -> str:
    """The key of a stored original BibTeX entry (``""`` if the text has none)."""
    match = _ORIGINAL_KEY.search(bibtex)
    return match.group(1) if match else ""


# -- entries --------------------------------------------------------------------------------------


_MONTH_FULL = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
               "october", "november", "december")
_MONTH_NAMES: dict[str, str] = {"sept": "sep", "sept.": "sep"}
for _macro, _full in zip(MONTH_MACROS, _MONTH_FULL, strict=True):
    _MONTH_NAMES.update({_macro: _macro, _macro + ".": _macro, _full: _macro})


def _month(value: str) -> str | None:
    """A month as a BibTeX macro (``jul``), or None when it is not recognisably one month."""
    value = value.strip().lower()
    if value.isdigit() and 1 <= int(value) <= 12:
        return MONTH_MACROS[int(value) - 1]
    return _MONTH_NAMES.get(value)


def _field_lines(paper: PaperRecord, include_abstract: bool) -> list[tuple[str, str]]:
    etype = _entry_type(paper)
    fields: list[tuple[str, str]] = []
    if paper.authors:
        fields.append(("author", "{" + " and ".join(tex_name(a) for a in paper.authors) + "}"))
    fields.append(("title", "{" + tex_title(paper.title) + "}"))
    extra = {k.lower(): v for k, v in (paper.extra or {}).items()
             if k.lower() not in INTERNAL_EXTRA and isinstance(v, str) and v.strip()
             and re.fullmatch(r"[a-z][a-z0-9_\-]*", k.lower())}
    venue_field = VENUE_FIELD.get(etype, "howpublished")
    for name in FIRST_CLASS_FIELDS:  # written from the record's own columns: never twice
        extra.pop(name, None)
    if paper.venue:
        fields.append((venue_field, "{" + tex_escape(paper.venue) + "}"))
        extra.pop(venue_field, None)
    if paper.year:
        fields.append(("year", "{" + str(paper.year) + "}"))
    ordered = [k for k in EXTRA_ORDER if k in extra] + sorted(k for k in extra if k not in EXTRA_ORDER)
    for name in ordered:
        value = extra[name]
        if name == "month" and (macro := _month(value)):
            fields.append(("month", macro))
        elif name in VERBATIM_FIELDS:
            fields.append((name, "{" + _verbatim(value) + "}"))
        elif name == "editor":
            fields.append((name, "{" + " and ".join(tex_name(e) for e in value.split(" and ")) + "}"))
        else:
            fields.append((name, "{" + tex_escape(value) + "}"))
    if paper.doi:
        fields.append(("doi", "{" + _verbatim(paper.doi) + "}"))
    if paper.arxiv:
        fields.append(("eprint", "{" + _verbatim(paper.arxiv) + "}"))
        fields.append(("archiveprefix", "{arXiv}"))
    if paper.keywords:
        fields.append(("keywords", "{" + tex_escape(paper.keywords) + "}"))
    if include_abstract and paper.abstract:
        fields.append(("abstract", "{" + tex_escape(paper.abstract) + "}"))
    return fields


def _entry_type(paper: PaperRecord) -> str:
    etype = (paper.entry_type or "").strip().lower()
    return etype if etype in ENTRY_TYPES else "misc"


def format_entry(paper: PaperRecord, key: str, include_abstract: bool = False) -> str:
    """The entry text for ``paper`` under ``key`` (fields one per line, two-space indent)."""
    lines = [f"  {name} = {value}" for name, value in _field_lines(paper, include_abstract)]
    return f"@{_entry_type(paper)}{{{key},\n" + ",\n".join(lines) + "\n}\n"


def bibtex_entry(
    paper: PaperRecord,
    existing_keys: Set[str] = frozenset(),
    key_style: str = DEFAULT_STYLE,
    *,
    include_abstract: bool = False,
) -> tuple[str, str]:
    """``(key, entry text)`` to insert into a user's ``.bib`` for ``paper``.

    The original BibTeX text, when the paper has one, is returned unchanged (ending, like a
    built entry, in one newline) with its own key, even if that key is in ``existing_keys``:
    the caller decides whether it is the same entry. Abstracts are left out
    unless asked for: they bloat a ``.bib`` and most styles never print them.
    """
    original = (paper.bibtex or "").strip()
    if original:
        key = original_key(original)
        if key:
            return key, original + "\n"
    key = make_key(paper, existing_keys, key_style)
    return key, format_entry(paper, key, include_abstract)
