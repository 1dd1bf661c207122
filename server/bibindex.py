"""Which papers a draft's ``.bib`` already holds, and under which keys (pure, no LSP types).

Why not ask the store: the ``.bib`` changes under the editor (an entry just appended by an
accepted suggestion, an edit not yet saved), and we must re-use an existing key as soon as the
text is there. So each bibliography text is scanned here for keys and the identifiers that make
two entries the same work -- DOI, arXiv id, normalised title -- the same rules the store uses
to deduplicate. :mod:`citewise.server.bibfiles` gives keys and lines; this adds identifiers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from citewise.indexer.bibtex_writer import FoldedKeys, entry_key, folded, format_entry, make_key
from citewise.indexer.braces import closing_brace
from citewise.indexer.records import PaperRecord, normalize_arxiv, normalize_doi, normalize_title
from citewise.indexer.texclean import tex_to_unicode
from citewise.settings import EntryStyle

from .bibfiles import iter_entries

_FIELD = re.compile(r"(?:^|[,\s])(doi|title|eprint|arxiv|arxivid|url)[ \t\r\n]*=[ \t\r\n]*", re.I)
_BARE = re.compile(r"[^,}\s]*")
_ARXIV_URL = re.compile(r"arxiv\.org/(?:abs|pdf)/([^\s{}\"]+?)(?:\.pdf)?$", re.I)
_MAX_VALUE = 5000  # a field value longer than this is not a title or an identifier


def _value(text: str, pos: int, end: int) -> str:
    """A BibTeX field value starting at ``pos``: ``{...}`` (nested), ``"..."`` or a bare word."""
    if pos >= end:
        return ""
    ch = text[pos]
    stop = min(end, pos + _MAX_VALUE)
    if ch == "{":
        close = closing_brace(text, pos, stop - pos)
        return text[pos + 1 : close if close is not None else stop]
    if ch == '"':
        close = text.find('"', pos + 1, stop)
        return text[pos + 1 : close if close != -1 else stop]
    m = _BARE.match(text, pos, stop)
    return m.group(0) if m else ""


def tex_title_key(title: str) -> str:
    """Normalised title of a TeX-written title, exactly as the importer computes it for a stored
    paper (:func:`tex_to_unicode`, then :func:`normalize_title`), so the two always agree."""
    return normalize_title(tex_to_unicode(title))


@dataclass
class BibEntryIds:
    key: str
    line: int  # 0-based line of the @type
    doi: str = ""
    arxiv: str = ""
    norm_title: str = ""
    title: str = ""  # braces and TeX commands dropped, for display


@dataclass
class BibIndex:
    """Keys and identifiers of one or more ``.bib`` texts (the draft's bibliography)."""

    entries: dict[str, BibEntryIds] = field(default_factory=dict)  # key -> ids
    files: dict[str, str] = field(default_factory=dict)  # key -> path of the file holding it
    _by_doi: dict[str, str] = field(default_factory=dict)
    _by_arxiv: dict[str, str] = field(default_factory=dict)
    _by_title: dict[str, str] = field(default_factory=dict)
    _folded: FoldedKeys | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_texts(cls, texts: Iterable[tuple[str, str]]) -> BibIndex:
        """Index ``(path, text)`` pairs; the first file holding a key wins, as in BibTeX."""
        idx = cls()
        for path, text in texts:
            idx.add_text(path, text)
        return idx

    def add_text(self, path: str, text: str) -> None:
        self._folded = None
        entries = list(iter_entries(text))
        for i, e in enumerate(entries):
            if e.key in self.entries:
                continue
            body_end = entries[i + 1].start if i + 1 < len(entries) else len(text)
            ids = BibEntryIds(e.key, e.line)
            for fm in _FIELD.finditer(text, e.body_start - 1, body_end):  # from the comma
                name = fm.group(1).lower()
                value = _value(text, fm.end(), body_end).strip()
                if name == "doi" and not ids.doi:
                    ids.doi = normalize_doi(value)
                elif name == "title" and not ids.norm_title:
                    ids.title = " ".join(tex_to_unicode(value).split())
                    ids.norm_title = normalize_title(ids.title)
                elif name in ("eprint", "arxiv", "arxivid") and not ids.arxiv:
                    ids.arxiv = normalize_arxiv(value)
                elif name == "url" and not ids.arxiv and (am := _ARXIV_URL.search(value)):
                    ids.arxiv = normalize_arxiv(am.group(1))
                elif name == "url" and not ids.doi and "doi.org/" in value:
                    ids.doi = normalize_doi(value)
            self.entries[e.key] = ids
            self.files[e.key] = path
            if ids.doi:
                self._by_doi.setdefault(ids.doi, e.key)
            if ids.arxiv:
                self._by_arxiv.setdefault(ids.arxiv, e.key)
            if ids.norm_title and len(ids.norm_title) > 12:
                self._by_title.setdefault(ids.norm_title, e.key)

    def merge(self, other: BibIndex, path: str | None = None) -> None:
        """Add ``other``'s entries that this index lacks (the first file holding a key wins)."""
        self._folded = None
        for key, ids in other.entries.items():
            if key in self.entries:
                continue
            self.entries[key] = ids
            self.files[key] = other.files.get(key, path or "")
        for mine, theirs in (
            (self._by_doi, other._by_doi),
            (self._by_arxiv, other._by_arxiv),
            (self._by_title, other._by_title),
        ):
            for ident, key in theirs.items():
                mine.setdefault(ident, key)

    @property
    def keys(self) -> set[str]:
        return set(self.entries)

    @property
    def folded_keys(self) -> FoldedKeys:
        """The keys lower-cased, folded once per index (not once per paper keyed)."""
        if self._folded is None:
            self._folded = folded(self.entries)
        return self._folded

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def key_for(self, paper: PaperRecord) -> str | None:
        """The key this bibliography already holds ``paper`` under (same DOI, arXiv id or title)."""
        if paper.doi and (k := self._by_doi.get(paper.doi)):
            return k
        if paper.arxiv and (k := self._by_arxiv.get(paper.arxiv)):
            return k
        nt = normalize_title(paper.title)
        if nt and (k := self._by_title.get(nt)):
            return k
        if paper.key and paper.key in self.entries:
            ids = self.entries[paper.key]
            # Same key and no identifier that says otherwise: the same entry (a hand-written one).
            if (not ids.doi or not paper.doi) and (not ids.norm_title or ids.norm_title == nt):
                return paper.key
        return None


class PaperKey:
    """How a paper is cited from this draft: its key, and the entry to add when it is new.

    The entry is built on first use: a completion list keys twenty papers per keystroke and
    inserts at most one of them.
    """

    __slots__ = ("key", "in_bib", "_paper", "_fields", "_keep", "_entry")

    def __init__(
        self,
        key: str,
        in_bib: bool,
        paper: PaperRecord | None = None,
        fields: str = "standard",
        keep: bool = False,
    ) -> None:
        self.key, self.in_bib = key, in_bib
        self._paper, self._fields, self._keep = paper, fields, keep
        self._entry: str | None = None if paper is not None and not in_bib else ""

    @property
    def entry(self) -> str:
        """BibTeX text to append (``""`` when the paper is already in the bibliography)."""
        if self._entry is None:
            assert self._paper is not None
            if self._keep:
                self._entry = (self._paper.bibtex or "").strip() + "\n"
            else:
                self._entry = format_entry(self._paper, self.key, fields=self._fields)
        return self._entry


def key_for_paper(paper: PaperRecord, bib: BibIndex, key_style: str | EntryStyle) -> PaperKey:
    """The existing key when the bibliography has the paper, else the key the BibTeX writer gives.

    The writer keeps a BibTeX-imported paper's own key; if that key is already taken by a
    different entry, a fresh key in the user's style is made instead of a clash.
    """
    if getattr(paper, "id", None) == 0 and paper.key:
        # A paper the store does not hold, offered from the draft's own .bib (server/bib_overlay.py,
        # completion.slot.own_entries): cited under its own key, and there is nothing to insert, even while
        # the .bib's key index is still being built.
        return PaperKey(paper.key, True)
    existing = bib.key_for(paper)
    if existing is not None:
        return PaperKey(existing, True)
    style = key_style if isinstance(key_style, EntryStyle) else EntryStyle(key_style)
    taken = bib.folded_keys
    key, keep = entry_key(paper, taken, style.key_style)
    if key in bib:
        key, keep = make_key(paper, taken, style.key_style), False
    return PaperKey(key, False, paper, style.fields, keep)


def append_text(bib_text: str, entry: str) -> str:
    """Text to insert at the end of a ``.bib`` so that the entry starts on its own line after a blank one."""
    if not bib_text:
        return entry
    sep = "" if bib_text.endswith("\n\n") else ("\n" if bib_text.endswith("\n") else "\n\n")
    return sep + entry
