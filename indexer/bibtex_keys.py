"""Citation keys for inserted entries: a template per user setting, unique against the keys a
``.bib`` already holds, and the rules for keeping a key the source chose.

Keys (``key_style``) are templates; these tokens are replaced, anything else from
``[A-Za-z0-9_:.-]`` is kept literally:

=============  ==========================================================================
``lastname``   first author's last name, ASCII-folded, lower case (``Lastname``: capitalised)
``authors``    ACL style: ``smith`` / ``smith-jones`` / ``smith-etal``
``year``       four-digit year (``YEAR`` is the same); ``yy``: two digits
``firstword``  first title word that is not a stopword, lower case (``Firstword``: capitalised)
=============  ==========================================================================

Named styles: ``"lastnameYEARfirstword"`` (default, Google Scholar's ``vaswani2017attention``),
``"authoryear"`` = ``lastnameYEAR``, ``"lastname_year"``, ``"acl"`` = ``authors-year-firstword``
(the ACL Anthology's own keys). A key the source chose and that is usable (JSON Lines
``bibtex_key``, a BibTeX key such as ``Vaswani2017Attention`` or ``smith_2020``) is kept; a
DOI-shaped key or one with characters that break ``\\cite`` or a ``.bib`` parser (spaces, ``#``,
``%``, ``,``, braces, ``~``, ``\\``, quotes, ``/``) never is. A key is made unique against
``existing_keys`` (compared case-insensitively, as BibTeX does) by appending ``a``, ``b``, ...
``z``, ``aa``, ``ab``...
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Set

from .records import PaperRecord
from .tex_escape import _LETTERS, _WORD

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

_USABLE_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_:.+\-]{0,99}")
_DOI_LIKE_KEY = re.compile(r"10\.[0-9]{4,}")

# -- keys -----------------------------------------------------------------------------------------


def ascii_fold(text: str) -> str:
    """ "Müller-Łukasz" -> "Muller-Lukasz": accents stripped, special letters spelled out (ß -> ss)."""
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
        "lastname": lastname,
        "Lastname": lastname.capitalize(),
        "LASTNAME": lastname.upper(),
        "authors": _authors_part(paper),
        "YEAR": year,
        "year": year,
        "yy": year[-2:],
        "firstword": word,
        "Firstword": word.capitalize(),
        "FIRSTWORD": word.upper(),
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


class FoldedKeys(frozenset):
    """Cite keys already lower-cased: a bibliography's keys, folded once and not once per paper
    keyed (a 50,000-entry ``.bib`` and 20 completion items made a million ``lower()`` calls)."""


def folded(keys: Iterable[str]) -> FoldedKeys:
    """``keys`` lower-cased (unchanged when they already are a :class:`FoldedKeys`)."""
    return keys if isinstance(keys, FoldedKeys) else FoldedKeys(k.lower() for k in keys)


def unique_key(key: str, existing_keys: Iterable[str]) -> str:
    """``key`` or ``key`` + a, b, ... so that it clashes with none of ``existing_keys``."""
    taken = folded(existing_keys)
    if key.lower() not in taken:
        return key
    n = 0
    while f"{key}{_suffix(n)}".lower() in taken:
        n += 1
    return f"{key}{_suffix(n)}"


def make_key(paper: PaperRecord, existing_keys: Set[str] = frozenset(), style: str = DEFAULT_STYLE) -> str:
    """A citation key for ``paper`` in ``style``, unique against ``existing_keys``.

    A key the paper's source chose (JSONL ``bibtex_key``) wins over the style: users picked it.
    """
    preferred = (paper.extra or {}).get("bibtex_key", "").strip()
    if usable_key(preferred):
        return unique_key(preferred, existing_keys)
    return unique_key(_render_style(paper, style), existing_keys)


def usable_key(key: str) -> bool:
    """Whether ``key`` may be a cite key: ASCII letters, digits and ``_:.+-``, not a DOI.

    Stricter than BibTeX: a key with ``/``, ``#``, ``%``, braces, quotes, ``~``, ``\\``, spaces or
    non-ASCII breaks ``\\cite``, biber or another tool of the chain, and a DOI is not a key
    anyone can read or type.
    """
    return bool(key) and _USABLE_KEY.fullmatch(key) is not None and not _DOI_LIKE_KEY.match(key)


_ORIGINAL_KEY = re.compile(r"@[ \t]*[A-Za-z]{1,20}[ \t]*[{(][ \t\r\n]*([^,\s]{1,200})\s*,")  # bounded: linear


def original_key(bibtex: str) -> str:
    """The key of a stored original BibTeX entry (``""`` if the text has none)."""
    match = _ORIGINAL_KEY.search(bibtex)
    return match.group(1) if match else ""
