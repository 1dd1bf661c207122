"""The paper record every importer yields and the store keeps.

Importers turn their source format into :class:`PaperRecord` objects with clean Unicode text
(no TeX escapes, no HTML or XML markup); the store only deduplicates and writes them. Keeping
one record type means the BibTeX writer, the search engines and the recommender never need to
know where a paper came from.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from citewise.errors import CitewiseError

_T = TypeVar("_T")


@dataclass
class PaperRecord:
    """One paper as imported. Text fields are clean Unicode; ``bibtex`` keeps the original entry."""

    title: str
    abstract: str = ""
    authors: list[str] = field(default_factory=list)  # "Last, First" where known
    year: int | None = None
    venue: str = ""
    entry_type: str = "article"  # BibTeX entry type, lower case
    keywords: str = ""  # comma-separated
    key: str = ""  # citation key in its source (BibTeX key, Anthology id, JSONL id)
    doi: str = ""
    arxiv: str = ""
    acl_id: str = ""
    bibtex: str = ""  # original BibTeX text when imported from BibTeX
    source: str = ""  # source file path
    source_line: int = 0  # 1-based line of the record in its source
    references: list[str] = field(default_factory=list)  # ids (DOI / arXiv / key) of cited papers
    # (cited id, sentence citing it) where the source has them (JSON Lines references' contexts);
    # stored apart from the paper (indexer/citations.py), so not part of the content hash.
    reference_contexts: list[tuple[str, str]] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)  # other fields worth keeping (pages, publisher...)
    # Ids beyond doi / arxiv / acl_id, spelled as refs (``openalex:W1``, ``corpusid:5``, ``mag:7``:
    # indexer/sources/ids.py), kept in ``paper_ids`` so citations by any of them resolve and
    # records of two sources merge; not part of the content hash (stored apart, like contexts).
    ids: list[str] = field(default_factory=list)
    # What ``citewise index --field`` matches (arXiv categories, OpenAlex topics and concepts, S2
    # fields of study): read by the import filters (indexer/filters.py) only, neither stored nor
    # hashed, so adding it changed no stored paper's hash.
    subjects: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.doi = normalize_doi(self.doi)
        self.arxiv = normalize_arxiv(self.arxiv)

    def content_hash(self) -> str:
        """Hash of everything that can change, so a re-import of an unchanged entry is a no-op."""
        payload = [
            self.title,
            self.abstract,
            self.authors,
            self.year,
            self.venue,
            self.entry_type,
            self.keywords,
            self.key,
            self.doi,
            self.arxiv,
            self.acl_id,
            self.bibtex,
            self.references,
            sorted(self.extra.items()),
        ]
        blob = json.dumps(payload, ensure_ascii=False)
        return hashlib.sha1(blob.encode("utf-8")).hexdigest()

    def stable_id(self) -> str:
        """An id that survives re-imports and moves between sources."""
        if self.doi:
            return f"doi:{self.doi}"
        if self.arxiv:
            return f"arxiv:{self.arxiv}"
        if self.acl_id:
            return f"acl:{self.acl_id}"
        nt = normalize_title(self.title)
        digest = hashlib.sha1(f"{nt}|{self.year or ''}".encode()).hexdigest()[:16]
        return f"title:{digest}"


_WS = re.compile(r"\s+")
_VERSION_SUFFIX = re.compile(r"v\d+$")
_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", re.I)


def normalize_doi(doi: str) -> str:
    """DOIs compare case-insensitively; a few sources carry URLs or stray whitespace."""
    doi = _WS.sub("", doi or "")
    doi = _DOI_PREFIX.sub("", doi)
    return doi.lower()


# A DOI starts "10.<registrant>/": bounded repeats, so a run of "10." stays linear.
_DOI_SHAPE = re.compile(r"10\.\d{1,9}(?:\.\d{1,9}){0,4}/\S")


def doi_or_empty(value: str) -> str:
    """The normalised DOI of a field that should hold one, "" when it holds something else (a
    handle such as ``http://hdl.handle.net/2065/12163``, ``n/a``, a truncated id, ``10.1162/``). Why: the store
    merges records that share a DOI, and a citation check calls an entry with a malformed DOI
    suspect, so a value that is no DOI must not become one."""
    doi = normalize_doi(value)
    return doi if _DOI_SHAPE.match(doi) else ""


_ARXIV_PREFIX = re.compile(r"^(?:https?://arxiv\.org/abs/|arxiv:)", re.I)


def normalize_arxiv(arxiv: str) -> str:
    """arXiv ids without prefix or version suffix (``2101.00001``, ``cs/0101001``)."""
    arxiv = _ARXIV_PREFIX.sub("", (arxiv or "").strip())
    return _VERSION_SUFFIX.sub("", arxiv).lower()


_NON_ALNUM = re.compile(r"[^0-9a-z]+")


def normalize_title(title: str) -> str:
    """Title for duplicate detection: accents folded, case and punctuation ignored."""
    title = title or ""
    if title.isascii():  # nothing to fold (most titles): the per-character pass was 50 us a title
        return _NON_ALNUM.sub(" ", title.lower()).strip()
    folded = unicodedata.normalize("NFKD", title)
    folded = "".join(c for c in folded if not unicodedata.combining(c)).lower()
    return _NON_ALNUM.sub(" ", folded).strip()


class RecordError(ValueError, CitewiseError):
    """A field of one JSON record has a shape the schema does not allow (message names it).

    Here, beside the records, rather than in the JSON Lines reader that raises it most: every
    reader of the open corpora raises it too, and the stream reader counts it."""


@dataclass
class ImportProblem:
    """A record an importer could not (or chose not to) import, with where it is.

    ``skipped`` marks deliberate skips (e.g. ACM "Session Details" records, which are not
    papers); otherwise the record is broken and the message says why. ``reason`` is a skip's
    reason in words shared by every record skipped for it (the message names this record), so
    an import's summary can count its skips by reason instead of giving a bare number.
    ``incomplete`` marks the end of reading before the end of the file (a truncated archive,
    trailing garbage, a reader that failed): what came before was kept, the rest was not read, and
    ``citewise index`` exits non-zero so a script does not take a half-read dump as success.
    """

    source: str
    line: int
    message: str
    skipped: bool = False
    reason: str = ""
    incomplete: bool = False

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.message}"

    @property
    def skip_reason(self) -> str:
        """What the summary counts this skip under: its reason, else its message."""
        return self.reason or self.message


def count_skips(items: Iterable[_T], reasons: dict[str, int]) -> Iterator[_T]:
    """``items`` unchanged, each deliberate skip among them counted in ``reasons`` by its
    reason: the importers' one tally, whichever store or loader then counts the skip itself."""
    for item in items:
        if isinstance(item, ImportProblem) and item.skipped:
            reasons[item.skip_reason] = reasons.get(item.skip_reason, 0) + 1
        yield item
