"""The data model both draft readers share, and the :class:`Scanner` protocol they implement.

Why a module of its own: :mod:`citewise.server.latex` and :mod:`citewise.server.markdown` build
these objects and :mod:`citewise.server.draft` (the public facade) dispatches to them; with the
model here, the readers import only this module and the facade imports all three, so nothing
imports in a circle. The conventions on offsets are those described in :mod:`citewise.server.draft`.
"""

from __future__ import annotations

import bisect
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

Lang = Literal["latex", "markdown"]
LANGS: tuple[Lang, ...] = ("latex", "markdown")

ReadFile = Callable[[str], "str | None"]
"""``read_file(name)``: text of a file named relative to the main document, or ``None`` if unreadable."""

SlotEdit = tuple[int, int, str, str]
"""``(start, end, before, after)``: replace ``[start, end)`` by ``before + key + after`` to fill a key slot."""

# --------------------------------------------------------------------------------------------
# Citations, key slots, the cursor
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CiteKey:
    """One key slot of a citation.

    ``key`` is the key exactly as written (surrounding whitespace excluded) and ``""`` for an
    empty slot, so ``text[start:end] == key`` always holds.
    """

    key: str
    start: int
    end: int
    placeholder: bool  # empty, ``?``, ``TODO``... -- a citation still to be chosen


@dataclass(frozen=True, slots=True)
class Citation:
    """One citation marker in the draft.

    ``command`` is the LaTeX command as written including the backslash and star (``\\citep*``),
    ``\\cite<>`` for the to-do marker, ``[@]`` for a Pandoc bracketed citation and ``@`` for a
    Pandoc in-text citation. ``start``/``end`` cover the whole marker (command, optional
    arguments, all key groups). ``groups`` are the ``[start, end)`` ranges of the key lists
    including their delimiters (``{...}``, ``[...]``, ``<...>``); ``\\cites`` has several. An
    in-text Markdown citation has no delimiters, hence no groups. ``closed`` is False while the
    user is still typing (``\\cite{smi`` with no ``}``); the last group then ends where the key
    list stops.
    """

    lang: Lang
    command: str
    start: int
    end: int
    keys: tuple[CiteKey, ...]
    groups: tuple[tuple[int, int], ...]
    closed: bool = True

    @property
    def has_placeholder(self) -> bool:
        return any(k.placeholder for k in self.keys)

    @property
    def is_todo_marker(self) -> bool:
        """``\\cite<>``: a to-do marker whose whole text is replaced by a real citation."""
        return self.command.endswith("<>")


@dataclass(frozen=True, slots=True)
class CursorCitation:
    """The key slot under the cursor, and how to put a chosen key there.

    ``start``/``end`` is the range a completion replaces; it contains ``offset`` and never spans
    a line break (LSP requires both). The insert range for an ``InsertReplaceEdit`` is
    ``[start, offset)``. ``key_index`` points into ``citation.keys``; it is ``None`` when the
    cursor sits in whitespace next to a key, where a *new* key is inserted (with a separator in
    ``before``/``after``). ``prefix`` is the partially typed key, the part before the cursor
    (``""`` for empty slots and placeholder tokens, which are not the start of a key); the server
    filters by the whole key, :attr:`filter_key`. ``typed`` is the literal document text in
    ``[start, offset)``, which a client fuzzy-matches against -- see :meth:`filter_text`.
    """

    citation: Citation
    offset: int
    key_index: int | None
    start: int
    end: int
    prefix: str
    typed: str
    placeholder: bool
    before: str = ""
    after: str = ""

    def replacement(self, key: str) -> str:
        """Text that replaces ``[start, end)`` to cite ``key`` here."""
        return f"{self.before}{key}{self.after}"

    def filter_text(self, key: str) -> str:
        """A ``filterText`` under which the client will not hide the item.

        Clients filter by the text between ``start`` and the cursor. For a normal slot that is
        the typed prefix of the key itself; for ``?``/``TODO`` or ``\\cite<`` it is not, so the
        typed text is prepended.
        """
        return key if self.typed == self.prefix else self.typed + key

    @property
    def key(self) -> CiteKey | None:
        return None if self.key_index is None else self.citation.keys[self.key_index]

    @property
    def filter_key(self) -> str:
        """What the server filters the offered keys by: the whole key under the cursor.

        The edit replaces ``[start, end)``, which is the whole key, so the list must fit the whole
        key: ``\\cite{|foo}`` and ``\\cite{fo|o}`` both filter by ``foo``. Filtering by ``prefix``
        (the text before the cursor) listed nothing that matches ``foo`` at ``\\cite{|foo}`` in
        texlab's own test cases. ``""`` for placeholders (``?``, ``TODO``, ``\\cite<>``) and new
        slots between keys: they name no key yet. In a citation still being typed (no closing
        brace) the key runs into the sentence (``\\cite{big1234.`` then a line break): its trailing
        sentence punctuation is the user's prose, not part of the key, and is not filtered by.
        """
        k = self.key
        if k is None or self.placeholder:
            return ""
        return k.key if self.citation.closed else k.key.rstrip(".,;:!?)")


@dataclass(frozen=True, slots=True)
class Placeholder:
    """A key slot that still needs a citation, with the text a recommender should read.

    ``start``/``end``/``before``/``after`` form the edit that fills it (see
    :meth:`replacement`); for diagnostics use the whole marker, ``citation.start/end``, since an
    empty slot has an empty range. ``context`` is :func:`citewise.server.draft.local_context` of the marker.
    """

    citation: Citation
    key_index: int
    start: int
    end: int
    token: str  # the placeholder as written: "", "?", "TODO", ...
    context: str
    before: str = ""
    after: str = ""
    # ``context`` with the placeholder's and the other citations' places marked (see
    # :func:`citewise.server.draft.marked_local_context`): what its query is built from.
    marked: str = ""

    def replacement(self, key: str) -> str:
        return f"{self.before}{key}{self.after}"


# --------------------------------------------------------------------------------------------
# The scanner protocol
# --------------------------------------------------------------------------------------------


@runtime_checkable
class Scanner(Protocol):
    """What a draft language reader provides; :mod:`citewise.server.draft` dispatches to one per language.

    The readers (:mod:`citewise.server.latex`, :mod:`citewise.server.markdown`) implement it as
    *modules* of pure functions, and the protocol describes such a module-like object (PEP 544
    lets a module satisfy a protocol). Why not scanner classes: a reader has no state -- the only
    state, the per-document cache of regions and citations, lives once in the facade for both
    languages -- so a class would only add a ``self`` to every function and a second name for
    each of the helpers that the tests and the server already import from the modules.

    Every function is pure: the text (and, for files other than the document, ``read_file``) in,
    plain data out. Functions that need the document's excluded regions take them as an argument,
    so the caller's cache is reused instead of rescanning.
    """

    def scan_regions(self, text: str) -> Regions:
        """Spans that are not prose and hold no citation (comments, verbatim, code, front matter)."""
        ...

    def scan_citations(self, text: str, regions: Regions) -> tuple[Citation, ...]:
        """Every citation marker outside ``regions``, sorted by start."""
        ...

    def cursor_in(self, text: str, cit: Citation, offset: int) -> CursorCitation | None:
        """The key slot of ``cit`` that ``offset`` is in, or ``None``."""
        ...

    def bare_cursor(self, text: str, offset: int, regions: Regions) -> CursorCitation | None:
        """A slot at ``offset`` that no scanned citation holds (Markdown: an ``@`` just typed)."""
        ...

    def slot_edit(self, text: str, cit: Citation, index: int) -> SlotEdit:
        """The edit that fills key slot ``index`` of ``cit``."""
        ...

    def to_plain(self, fragment: str) -> str:
        """Markup to prose, for a fragment whose citations and regions are already cut."""
        ...

    def global_context(
        self, text: str, read_file: ReadFile | None = None, regions: Regions | None = None
    ) -> tuple[str, str]:
        """``(title, abstract)`` as plain text; ``regions`` are ``text``'s own (scanned when ``None``)."""
        ...

    def bibliography_files(
        self, text: str, read_file: ReadFile | None = None, regions: Regions | None = None
    ) -> list[str]:
        """Declared bibliography files, as written, without duplicates."""
        ...


# --------------------------------------------------------------------------------------------
# Placeholder tokens
# --------------------------------------------------------------------------------------------

_PLACEHOLDER_RE = re.compile(r"(?:\?+|\.{2,}|…|todo|xxx+|tbd|fixme)", re.IGNORECASE)


def is_placeholder_token(key: str) -> bool:
    """Whether a key as written means "a citation goes here" rather than naming an entry.

    Empty, ``?``/``??``, ``...``, ``TODO``, ``XXX``, ``TBD``, ``FIXME`` (any case). Real BibTeX
    keys never look like these, so flagging them cannot hide a real citation.
    """
    return not key or _PLACEHOLDER_RE.fullmatch(key) is not None


# --------------------------------------------------------------------------------------------
# Regions the scanners skip (comments, code, verbatim), and cutting them out
# --------------------------------------------------------------------------------------------


class Regions:
    """Sorted, merged half-open spans that the scanners must ignore.

    Built once per text (comments, verbatim, code blocks...) so that membership is a bisect
    instead of a rescan of the line, keeping citation finding linear in the document size.
    """

    __slots__ = ("starts", "ends")

    def __init__(self, spans: Iterable[tuple[int, int]] = ()) -> None:
        starts: list[int] = []
        ends: list[int] = []
        for s, e in sorted(spans):
            if e <= s:
                continue
            if ends and s <= ends[-1]:
                ends[-1] = max(ends[-1], e)
            else:
                starts.append(s)
                ends.append(e)
        self.starts = starts
        self.ends = ends

    def __len__(self) -> int:
        return len(self.starts)

    def contains(self, pos: int) -> bool:
        i = bisect_right(self.starts, pos) - 1
        return i >= 0 and pos < self.ends[i]

    def overlapping(self, start: int, end: int) -> list[tuple[int, int]]:
        """Spans intersecting ``[start, end)``, in order."""
        i = max(bisect_right(self.starts, start) - 1, 0)
        out = []
        while i < len(self.starts) and self.starts[i] < end:
            if self.ends[i] > start:
                out.append((self.starts[i], self.ends[i]))
            i += 1
        return out


def cut_text(
    text: str,
    start: int,
    end: int,
    cuts: Sequence[tuple[int, int]],
    fill: Mapping[tuple[int, int], str] | None = None,
    table: Mapping[int, str] | None = None,
) -> str:
    """``text[start:end]`` with the (sorted) ``cuts`` removed, each replaced by one space, or by
    its text in ``fill``; the kept text is passed through ``str.translate(table)`` when given."""
    pieces = []
    pos = start
    for s, e in cuts:
        if e <= pos or s >= end:
            continue
        if s > pos:
            pieces.append(text[pos:s] if table is None else text[pos:s].translate(table))
        pieces.append(fill.get((s, e), " ") if fill else " ")
        pos = max(pos, e)
    if pos < end:
        pieces.append(text[pos:end] if table is None else text[pos:end].translate(table))
    return "".join(pieces)


# --------------------------------------------------------------------------------------------
# Citations sorted by start: the few near an offset, a bisect rather than a scan
# --------------------------------------------------------------------------------------------


def citation_start(cit: Citation) -> int:
    """Sort key of citations: every citation list is sorted by it, so bisects can use it."""
    return cit.start


def citations_before(cits: Sequence[Citation], offset: int, back: int = 4) -> Sequence[Citation]:
    """The last ``back`` citations starting before ``offset``: the only ones that can hold a cursor there.

    Several only because a LaTeX citation may sit in another one's optional argument.
    """
    lo = bisect.bisect_left(cits, offset, key=citation_start)
    return cits[max(0, lo - back) : lo]


def citations_near(cits: Sequence[Citation], offset: int, back: int = 4) -> Sequence[Citation]:
    """The few citations that can contain ``offset`` (sorted by start; a handful may nest)."""
    lo = bisect.bisect_right(cits, offset, key=citation_start)
    return cits[max(0, lo - back) : lo]


def citations_overlapping(cits: Sequence[Citation], start: int, end: int) -> list[Citation]:
    """Citations (sorted by start) that intersect ``[start, end)`` -- a bisect, not a scan."""
    lo = bisect.bisect_left(cits, start, key=citation_start)
    out = [c for c in cits[max(0, lo - 4) : lo] if c.end > start]
    hi = bisect.bisect_left(cits, end, lo=lo, key=citation_start)  # not cits[lo:]: a copy of the tail
    out.extend(cits[lo:hi])
    return out


# --------------------------------------------------------------------------------------------
# Prose of a whole text: citations and regions cut, markup gone, whitespace normalised
# --------------------------------------------------------------------------------------------

_SPACE_PUNCT_RE = re.compile(r" ([,.;:!?)\]])")
_OPEN_SPACE_RE = re.compile(r"([(\[]) ")


def normalize_space(s: str) -> str:
    """Collapse whitespace and the gaps left where markers were cut (``"by , we"`` -> ``"by, we"``)."""
    s = " ".join(s.split())
    s = _SPACE_PUNCT_RE.sub(r"\1", s)
    return _OPEN_SPACE_RE.sub(r"\1", s)


def prose(text: str, citations: Iterable[Citation], regions: Regions, to_plain: Callable[[str], str]) -> str:
    """All of ``text`` as normalised prose: ``citations`` and ``regions`` cut, markup removed by the
    reader's ``to_plain``. One function for a reader's fragments (title, abstract) and the
    facade's whole-draft query, so both clean a text the same way."""
    cuts = [(c.start, c.end) for c in citations]
    cuts.extend(zip(regions.starts, regions.ends, strict=True))
    cuts.sort()
    return normalize_space(to_plain(cut_text(text, 0, len(text), cuts)))
