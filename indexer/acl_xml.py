"""Import the ACL Anthology's own XML metadata (``data/xml/*.xml`` of the upstream repository).

One file is one *collection* (``P18.xml``, ``2020.acl.xml``) holding *volumes*, each with a
``<meta>`` (booktitle, year, publisher...), an optional ``<frontmatter>`` and its ``<paper>``
elements. Only ``<paper>`` elements are papers: front matter is the proceedings' preface, not
something anyone cites, so it is neither yielded nor reported (the Anthology's own paper count
is the number of ``<paper>`` elements).

The files are parsed with :func:`lxml.etree.iterparse` and every paper is cleared as soon as it
has been turned into a record, so memory stays constant however large a collection is (the
biggest files hold thousands of papers).

Choices worth knowing:

* **Anthology ids** follow the Anthology's own rule (``build_anthology_id`` upstream):
  new-style collections (``2020.acl``) give ``2020.acl-main.1`` (``<collection>-<volume>.<paper>``);
  old-style ones give ``P18-1001`` (``<collection>-<volume><paper:03>``), except workshops
  (``W``), ``C69`` and ``D19`` volumes 5 and up, which use two digits each (``W18-6401``). The id
  is both ``acl_id`` and ``key``.
* **Entry type**: journal collections (old ``J``/``Q``: Computational Linguistics and TACL; new
  ``cl``, ``tacl``, ``lilt``, ``tal``, ``ijclclp``) and papers carrying their own ``<journal>``
  are ``article`` with ``venue`` = the journal name parsed from the booktitle ("Computational
  Linguistics, Volume 36, Number 1, March 2010" -> "Computational Linguistics", volume and
  number go to ``extra``). Everything else is ``inproceedings`` with ``venue`` = booktitle.
* **Year** comes from the volume's ``<meta>``; many old volumes have none, so it falls back to
  the collection id (``J74`` -> 1974, ``2020.acl`` -> 2020), as the Anthology itself does.
* **Markup** (``<fixed-case>``, ``<b>``, ``<i>``, ``<url>``, nested) becomes the text of all
  children in order; ``<tex-math>`` is turned into readable text (``\\alpha`` -> "α",
  ``\\mathcal{O}(n^{3})`` -> "O(n^3)") so that it is searchable; whitespace is collapsed.
* **Broken XML** ends the file with one :class:`ImportProblem` naming file and line; the papers
  before the error have already been yielded.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from lxml import etree

from .records import ImportProblem, PaperRecord, doi_or_empty

ANTHOLOGY_URL = "https://aclanthology.org/"

# New-style venue ids of journals (upstream ``data.JOURNAL_IDS``); old-style: J (CL), Q (TACL).
JOURNAL_VENUES = frozenset({"cl", "tacl", "lilt", "tal", "ijclclp"})
OLD_JOURNAL_LETTERS = frozenset({"J", "Q"})


def collapse_ws(text: str) -> str:
    """One space between words, none at the ends: XML indentation is not content."""
    return " ".join(text.split())


def is_new_style(collection_id: str) -> bool:
    """New-style collection ids start with the year (``2020.acl``); old ones with a letter."""
    return collection_id[:1].isdigit()


def build_anthology_id(collection_id: str, volume_id: str, paper_id: str) -> str:
    """The Anthology id of a paper, padded exactly as the Anthology pads it."""
    if is_new_style(collection_id):
        return f"{collection_id}-{volume_id}.{paper_id}"
    if collection_id[0] == "W" or collection_id == "C69" or (collection_id == "D19" and int(volume_id) >= 5):
        return f"{collection_id}-{int(volume_id):02d}{int(paper_id):02d}"
    return f"{collection_id}-{int(volume_id)}{int(paper_id):03d}"


def year_from_collection(collection_id: str) -> int | None:
    """``2020.acl`` -> 2020, ``P18`` -> 2018, ``J74`` -> 1974 (two-digit years >= 60 are 19xx)."""
    if is_new_style(collection_id):
        head = collection_id.split(".", 1)[0]
        return int(head) if head.isdecimal() and len(head) <= 4 else None
    digits = collection_id[1:3]
    if len(digits) != 2 or not digits.isdecimal():
        return None
    yy = int(digits)
    return 1900 + yy if yy >= 60 else 2000 + yy


def is_journal_collection(collection_id: str) -> bool:
    """Whether a collection holds journal issues rather than proceedings."""
    if is_new_style(collection_id):
        return collection_id.split(".", 1)[-1] in JOURNAL_VENUES
    return collection_id[:1] in OLD_JOURNAL_LETTERS


# -- TeX math -------------------------------------------------------------------------------------

_MATH_SYMBOLS: dict[str, str] = {
    # Greek
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "epsilon": "ϵ",
    "varepsilon": "ε",
    "zeta": "ζ",
    "eta": "η",
    "theta": "θ",
    "vartheta": "ϑ",
    "iota": "ι",
    "kappa": "κ",
    "lambda": "λ",
    "mu": "μ",
    "nu": "ν",
    "xi": "ξ",
    "pi": "π",
    "varpi": "ϖ",
    "rho": "ρ",
    "varrho": "ϱ",
    "sigma": "σ",
    "varsigma": "ς",
    "tau": "τ",
    "upsilon": "υ",
    "phi": "ϕ",
    "varphi": "φ",
    "chi": "χ",
    "psi": "ψ",
    "omega": "ω",
    "Gamma": "Γ",
    "Delta": "Δ",
    "Theta": "Θ",
    "Lambda": "Λ",
    "Xi": "Ξ",
    "Pi": "Π",
    "Sigma": "Σ",
    "Upsilon": "Υ",
    "Phi": "Φ",
    "Psi": "Ψ",
    "Omega": "Ω",
    # arrows
    "rightarrow": "→",
    "to": "→",
    "leftarrow": "←",
    "gets": "←",
    "leftrightarrow": "↔",
    "Rightarrow": "⇒",
    "Leftarrow": "⇐",
    "Leftrightarrow": "⇔",
    "mapsto": "↦",
    "uparrow": "↑",
    "downarrow": "↓",
    "longrightarrow": "⟶",
    "implies": "⟹",
    "iff": "⟺",
    # relations and operators
    "times": "×",
    "cdot": "·",
    "cdots": "⋯",
    "ldots": "…",
    "dots": "…",
    "pm": "±",
    "mp": "∓",
    "div": "÷",
    "leq": "≤",
    "le": "≤",
    "geq": "≥",
    "ge": "≥",
    "neq": "≠",
    "ne": "≠",
    "approx": "≈",
    "sim": "∼",
    "simeq": "≃",
    "equiv": "≡",
    "propto": "∝",
    "ll": "≪",
    "gg": "≫",
    "in": "∈",
    "notin": "∉",
    "ni": "∋",
    "subset": "⊂",
    "subseteq": "⊆",
    "supset": "⊃",
    "supseteq": "⊇",
    "cup": "∪",
    "cap": "∩",
    "emptyset": "∅",
    "varnothing": "∅",
    "forall": "∀",
    "exists": "∃",
    "neg": "¬",
    "lnot": "¬",
    "wedge": "∧",
    "land": "∧",
    "vee": "∨",
    "lor": "∨",
    "oplus": "⊕",
    "otimes": "⊗",
    "circ": "∘",
    "bullet": "•",
    "star": "⋆",
    "ast": "∗",
    "infty": "∞",
    "partial": "∂",
    "nabla": "∇",
    "sum": "∑",
    "prod": "∏",
    "int": "∫",
    "sqrt": "√",
    "prime": "′",
    "degree": "°",
    "ell": "ℓ",
    "hbar": "ℏ",
    "mid": "|",
    "vert": "|",
    "Vert": "‖",
    "langle": "⟨",
    "rangle": "⟩",
    "lfloor": "⌊",
    "rfloor": "⌋",
    "lceil": "⌈",
    "rceil": "⌉",
    "top": "⊤",
    "bot": "⊥",
    "vdash": "⊢",
    "models": "⊨",
    "dagger": "†",
    # spacing
    ",": " ",
    ";": " ",
    ":": " ",
    "!": "",
    "quad": " ",
    "qquad": " ",
    " ": " ",
    # escaped specials
    "{": "{",
    "}": "}",
    "#": "#",
    "%": "%",
    "&": "&",
    "_": "_",
    "$": "$",
    "\\": " ",
}

# Commands whose argument is kept and the command dropped (fonts, text, decorations).
_WRAPPERS = frozenset(
    {
        "mathcal",
        "mathrm",
        "mathbf",
        "mathit",
        "mathsf",
        "mathtt",
        "mathbb",
        "mathfrak",
        "mathscr",
        "boldsymbol",
        "bm",
        "text",
        "textrm",
        "textit",
        "textbf",
        "texttt",
        "textsf",
        "emph",
        "mbox",
        "operatorname",
        "hat",
        "widehat",
        "tilde",
        "widetilde",
        "bar",
        "overline",
        "underline",
        "vec",
        "dot",
        "ddot",
        "acute",
        "grave",
        "check",
        "breve",
        "left",
        "right",
        "big",
        "Big",
        "bigg",
        "Bigg",
        "displaystyle",
        "textstyle",
        "scriptstyle",
        "limits",
        "nolimits",
    }
)

_COMMAND = re.compile(r"\\([A-Za-z]+|.)")
_FRAC = re.compile(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_SINGLE_FRAC = re.compile(r"\((\w)\)/\((\w)\)")


def tex_math_to_text(src: str) -> str:
    """Readable, searchable text for a ``<tex-math>`` formula.

    Not a TeX renderer: symbols become their Unicode characters, font and accent commands are
    dropped (their argument stays), ``\\frac{a}{b}`` becomes ``a/b``, grouping braces go and
    ``^``/``_`` stay. Unknown commands keep their name (``\\log`` -> "log"). Spaces are kept as
    written (TeX would drop them in math, but "α → O" reads and tokenises better than "α→O").
    """
    src = src.replace("$", "")
    src = _FRAC.sub(r"(\1)/(\2)", src)
    src = _SINGLE_FRAC.sub(r"\1/\2", src)  # (a)/(b) -> a/b for single symbols

    def command(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in _MATH_SYMBOLS:
            return _MATH_SYMBOLS[name]
        if name in _WRAPPERS:
            return ""
        return name

    out: list[str] = []
    pos = 0
    for match in _COMMAND.finditer(src):
        out.append(_strip_braces(src[pos : match.start()]))
        out.append(command(match))
        pos = match.end()
    out.append(_strip_braces(src[pos:]))
    return collapse_ws("".join(out))


def _strip_braces(text: str) -> str:
    return text.replace("{", "").replace("}", "").replace("~", " ")


# -- markup ---------------------------------------------------------------------------------------


def markup_text(elem: etree._Element | None) -> str:
    """Clean text of an element with Anthology markup: all text in document order, collapsed."""
    if elem is None:
        return ""
    parts: list[str] = []
    _collect(elem, parts)
    return collapse_ws("".join(parts))


def _collect(elem: etree._Element, parts: list[str]) -> None:
    if elem.text:
        parts.append(elem.text)
    for child in elem:
        if isinstance(child.tag, str):  # comments and processing instructions have no str tag
            if child.tag == "tex-math":
                parts.append(tex_math_to_text("".join(child.itertext())))
            else:
                _collect(child, parts)
        if child.tail:
            parts.append(child.tail)


def person_name(elem: etree._Element) -> str:
    """``<author><first>Ben</first><last>Smith</last></author>`` -> "Smith, Ben" ("Smith" alone)."""
    first = collapse_ws(elem.findtext("first") or "")
    last = collapse_ws(elem.findtext("last") or "")
    if last and first:
        return f"{last}, {first}"
    return last or first


# -- volumes --------------------------------------------------------------------------------------

_JOURNAL_NAME_END = re.compile(r"[,(]")  # (``^(.*?)\s*(?:,|\(|$)`` was quadratic on space runs)
_JOURNAL_VOLUME = re.compile(r"\bVolume\s+(\d+)", re.I)
_JOURNAL_NUMBER = re.compile(r"\b(?:Number|Issue)\s+([0-9][0-9\-–/]*)", re.I)


@dataclass
class _Volume:
    """What a volume's ``<meta>`` says, shared by all its papers."""

    collection: str
    id: str
    booktitle: str = ""
    year: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


def _read_meta(vol: _Volume, meta: etree._Element) -> None:
    vol.booktitle = markup_text(meta.find("booktitle"))
    year = (meta.findtext("year") or "").strip()
    # (isdecimal, not isdigit: "²" is a digit that int() refuses; a year has at most 4 figures.)
    vol.year = int(year) if year.isdecimal() and len(year) <= 4 else year_from_collection(vol.collection)
    for tag in ("publisher", "address", "month"):
        value = collapse_ws(meta.findtext(tag) or "")
        if value:
            vol.extra[tag] = value
    editors = [person_name(e) for e in meta.findall("editor")]
    if any(editors):
        vol.extra["editor"] = " and ".join(e for e in editors if e)


def _journal_fields(booktitle: str) -> dict[str, str]:
    """Journal name, volume and number from an issue's booktitle."""
    out: dict[str, str] = {}
    end = _JOURNAL_NAME_END.search(booktitle)
    name = (booktitle[: end.start()] if end else booktitle).strip()
    out["journal"] = name or booktitle
    volume = _JOURNAL_VOLUME.search(booktitle)
    if volume:
        out["volume"] = volume.group(1)
    number = _JOURNAL_NUMBER.search(booktitle)
    if number:
        out["number"] = number.group(1)
    return out


def _paper_record(vol: _Volume, paper: etree._Element, path: str) -> PaperRecord:
    paper_id = paper.get("id", "").strip()
    if not paper_id or not vol.id:
        raise ValueError("a paper and its volume need an id")
    acl_id = build_anthology_id(vol.collection, vol.id, paper_id)
    extra = dict(vol.extra)
    pages = collapse_ws(paper.findtext("pages") or "")
    if pages:
        extra["pages"] = pages
    extra["url"] = ANTHOLOGY_URL + acl_id
    paper_editors = [person_name(e) for e in paper.findall("editor")]
    if any(paper_editors):
        extra["editor"] = " and ".join(e for e in paper_editors if e)

    own_journal = collapse_ws(paper.findtext("journal") or "")
    if own_journal or is_journal_collection(vol.collection):
        entry_type = "article"
        jf = _journal_fields(vol.booktitle) if not own_journal else {"journal": own_journal}
        venue = jf.pop("journal")
        extra.update(jf)
        for tag, name in (("volume", "volume"), ("issue", "number")):
            value = collapse_ws(paper.findtext(tag) or "")
            if value:
                extra[name] = value
    else:
        entry_type = "inproceedings"
        venue = vol.booktitle

    return PaperRecord(
        title=markup_text(paper.find("title")),
        abstract=markup_text(paper.find("abstract")),
        authors=[name for name in (person_name(a) for a in paper.findall("author")) if name],
        year=vol.year,
        venue=venue,
        entry_type=entry_type,
        key=acl_id,
        doi=doi_or_empty(paper.findtext("doi") or ""),  # PACLIC volumes put handles there
        acl_id=acl_id,
        source=path,
        source_line=paper.sourceline or 0,
        extra=extra,
    )


# -- the importer ---------------------------------------------------------------------------------


# Only these elements produce events: the others (titles, authors...) are read from their paper,
# and skipping their events is most of the parsing time saved.
_EVENT_TAGS = ("collection", "volume", "meta", "frontmatter", "paper")


def iter_acl_xml(path: str) -> Iterator[PaperRecord | ImportProblem]:
    """Yield a :class:`PaperRecord` per ``<paper>`` of one Anthology XML file, in file order.

    Streams with ``iterparse`` and frees each paper (and what precedes it) once read. Problems
    (unreadable file, broken XML, a paper without a usable id) become :class:`ImportProblem`
    items with file and line instead of exceptions, so one bad file cannot stop an import.
    """
    path = str(path)
    collection = ""
    vol: _Volume | None = None
    try:
        context = etree.iterparse(
            path,
            events=("start", "end"),
            tag=_EVENT_TAGS,
            remove_comments=True,
            remove_pis=True,
            huge_tree=True,
        )
        for event, elem in context:
            tag = elem.tag
            parent = elem.getparent()
            ptag = parent.tag if parent is not None else None
            if event == "start":
                if tag == "collection" and parent is None:
                    collection = (elem.get("id") or "").strip()
                elif tag == "volume" and ptag == "collection":
                    vol = _Volume(collection=collection, id=(elem.get("id") or "").strip())
                    vol.year = year_from_collection(collection) if collection else None
                continue
            # end events
            if tag == "meta" and ptag == "volume" and vol is not None:
                _read_meta(vol, elem)
                _release(elem)
            elif tag == "paper" and ptag == "volume":
                yield _paper_or_problem(vol, collection, elem, path)
                _release(elem)
            elif tag == "frontmatter" and ptag == "volume":
                _release(elem)
            elif tag == "volume" and ptag == "collection":
                _release(elem)
                vol = None
        if not collection:
            yield ImportProblem(path, 1, "not an ACL Anthology XML file (no <collection id=...> root)")
    except etree.XMLSyntaxError as exc:
        line = exc.lineno or (exc.position[0] if exc.position else 0)
        yield ImportProblem(path, line or 0, f"broken XML: {exc.msg}")
    except OSError as exc:
        yield ImportProblem(path, 0, f"cannot read: {exc.strerror or exc}")


def _paper_or_problem(
    vol: _Volume | None, collection: str, paper: etree._Element, path: str
) -> PaperRecord | ImportProblem:
    """The record of one ended ``<paper>``, or the problem that keeps it out: a paper that cannot
    be given an Anthology id is reported with its file and line, and the import goes on."""
    if vol is None or not collection:
        return ImportProblem(
            path, paper.sourceline or 0, "<paper> outside a <collection>/<volume> with an id"
        )
    try:
        return _paper_record(vol, paper, path)
    except ValueError as exc:  # a missing id, or a non-numeric one in an old-style collection
        return ImportProblem(
            path,
            paper.sourceline or 0,
            f"paper {paper.get('id')!r} in volume {vol.id!r}: {exc}",
        )


def _release(elem: etree._Element) -> None:
    """Free an element and the already-processed siblings before it (constant memory)."""
    elem.clear(keep_tail=True)
    parent = elem.getparent()
    if parent is not None:
        while elem.getprevious() is not None:
            del parent[0]
