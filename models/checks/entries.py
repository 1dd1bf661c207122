"""Does a ``.bib`` entry describe a paper the store knows, and does it say what the store says?

The signs of a made-up reference that the store can show (issue 27): a DOI or arXiv id that
belongs to a stored paper with another title; a title that (nearly) matches a stored paper whose
authors or year are not the entry's; an identifier that cannot be one. Smaller disagreements with
the stored record of the same paper (a year off by one, a shortened title, another venue
spelling) are ``metadata-mismatch``, for information. Precision first: where the evidence is
weak (no identifier, a title shared by an extended version by the same authors) nothing is said.

Pure: the stored records come in through :class:`Evidence`; :mod:`.evidence` reads them from a store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Protocol

from citewise.indexer.bibtex import iter_bibtex_text
from citewise.indexer.records import PaperRecord, normalize_doi, normalize_title
from citewise.indexer.store import StoredPaper
from citewise.indexer.tex_escape import tex_escape, tex_name, tex_title

from .findings import MISMATCH, NOT_IN_STORE, SUSPECT, FieldFix, Finding

_DOI_OK = re.compile(r"^10\.\d{4,9}(?:\.\d{1,9}){0,4}/\S+$")
_ARXIV_OK = re.compile(r"^(?:\d{4}\.\d{4,5}|[a-z][a-z\-]{0,24}(?:\.[a-z]{2})?/\d{7})$")
_RAW_FIELD = re.compile(r"(?:^|[,\s])(doi|eprint|archiveprefix|eprinttype)[ \t\r\n]*=[ \t\r\n]*", re.I)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# A year this far from the stored one is not a preprint-versus-proceedings difference.
YEAR_GAP = 2


@dataclass
class EntryFacts:
    """What one ``.bib`` entry says about its paper, cleaned as the importer cleans it."""

    key: str
    record: PaperRecord
    raw_doi: str = ""  # the doi field as written ("" when absent)
    raw_arxiv: str = ""  # the arXiv eprint as written
    venue_field: str = ""  # which field holds the venue (booktitle / journal / ...)


def read_entry(text: str, source: str = "") -> EntryFacts | None:
    """The facts of the one entry in ``text`` (None: it does not parse as an entry)."""
    rec = next((r for r in iter_bibtex_text(text, source) if isinstance(r, PaperRecord)), None)
    if rec is None:
        return None
    raw = _raw_fields(text)
    arxiv = ""
    if raw.get("archiveprefix", "").lower() == "arxiv" or raw.get("eprinttype", "").lower() == "arxiv":
        arxiv = raw.get("eprint", "")
    venue_field = next(
        (
            f
            for f in ("booktitle", "journal", "journaltitle")
            if re.search(rf"(?:^|[,\s]){f}\s*=", text, re.I)
        ),
        "",
    )
    return EntryFacts(rec.key, rec, raw.get("doi", ""), arxiv, venue_field)


def _raw_fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in _RAW_FIELD.finditer(text):
        rest = text[m.end() : m.end() + 400]
        if rest.startswith("{"):
            value = rest[1:].split("}", 1)[0]
        elif rest.startswith('"'):
            value = rest[1:].split('"', 1)[0]
        else:
            value = re.split(r"[,}\s]", rest, maxsplit=1)[0]
        out.setdefault(m.group(1).lower(), value.replace("{", "").replace("}", "").strip())
    return out


# -- comparing what an entry says with what the store says --------------------------------------


def title_relation(a: str, b: str) -> str:
    """``same`` (equal once normalised), ``variant`` (a subtitle more or less, a typo or two),
    ``near`` (some words changed) or ``different``."""
    # Control characters are mojibake in the source data (an Anthology title stores "d\x8ependance"):
    # the BibTeX writer drops them, so an entry written from the record must still be "same".
    na, nb = (normalize_title(_CONTROL.sub("", t).translate(_TRANSLIT)) for t in (a, b))
    if not na or not nb:
        return "different"
    if na == nb:
        return "same"
    short, long_ = sorted((na, nb), key=len)
    if len(short) >= 12 and long_.startswith(short + " "):
        return "variant"  # "Title" against "Title: a subtitle"
    ratio = SequenceMatcher(None, na, nb, autojunk=False).ratio()
    if ratio >= 0.93:
        return "variant"
    wa, wb = set(na.split()), set(nb.split())
    overlap = len(wa & wb) / max(len(wa | wb), 1)
    if ratio >= 0.7 or overlap >= 0.6:
        return "near"
    return "different"


# Letters that do not decompose into a base letter and an accent, spelled as the BibTeX writer
# and most bibliographies spell them (Sigurðsson / Sigurdsson, Þorsteinsson / Thorsteinsson).
_TRANSLIT = str.maketrans(
    {
        "ð": "d",
        "Ð": "D",
        "þ": "th",
        "Þ": "Th",
        "ø": "o",
        "Ø": "O",
        "æ": "ae",
        "Æ": "Ae",
        "œ": "oe",
        "Œ": "Oe",
        "ł": "l",
        "Ł": "L",
        "ß": "ss",
        "đ": "d",
        "Đ": "D",
        "ı": "i",
    }
)


def _fold(s: str) -> str:
    """Names and venues compared as titles are: ``normalize_title`` after the transliteration."""
    return normalize_title(s.translate(_TRANSLIT))


def surname(name: str) -> str:
    """The family name of "Last, First" or "First Last" (folded, for comparing)."""
    name = name.strip()
    last = name.split(",", 1)[0] if "," in name else (name.split()[-1] if name.split() else "")
    return _fold(last)


def author_relation(entry: list[str], stored: list[str]) -> str:
    """``same`` (same family names), ``overlap`` (some shared), ``disjoint`` (none shared), or
    ``unknown`` (one side names nobody, or "and others" alone)."""
    a = {s for s in (surname(n) for n in entry) if s and s != "others"}
    b = {s for s in (surname(n) for n in stored) if s and s != "others"}
    if not a or not b:
        return "unknown"
    if a == b:
        return "same"
    # "and others" / a truncated list: every name given is a stored one.
    if a <= b or b <= a:
        return "overlap"
    return "overlap" if a & b else "disjoint"


def venue_differs(a: str, b: str) -> bool:
    """Whether two venue strings name different venues (beyond spelling and abbreviation)."""
    fa, fb = _fold(a), _fold(b)
    if not fa or not fb or fa in fb or fb in fa:
        return False
    wa, wb = set(fa.split()), set(fb.split())
    return len(wa & wb) / max(min(len(wa), len(wb)), 1) < 0.3


def doi_malformed(raw: str) -> bool:
    return bool(raw.strip()) and not _DOI_OK.match(normalize_doi(raw.replace("\\_", "_")))


def arxiv_malformed(raw: str) -> bool:
    from citewise.indexer.records import normalize_arxiv

    return bool(raw.strip()) and not _ARXIV_OK.match(normalize_arxiv(raw))


# -- the check ---------------------------------------------------------------------------------


class Evidence(Protocol):
    """Stored records independent of the draft's own ``.bib`` files (see :mod:`.evidence`)."""

    def by_doi(self, doi: str) -> list[StoredPaper]: ...

    def by_arxiv(self, arxiv: str) -> list[StoredPaper]: ...

    def by_title(self, title: str) -> list[StoredPaper]: ...


@dataclass
class EntryCheck:
    """The outcome for one entry: its findings, and the stored paper it stands for (if any)."""

    findings: list[Finding] = field(default_factory=list)
    paper: StoredPaper | None = None


def describe(p: StoredPaper) -> str:
    who = surname(p.authors[0]).title() if p.authors else "unknown authors"
    if len(p.authors) > 1:
        who += " et al."
    return f"\u201c{p.title}\u201d ({who}, {p.year or 'n.d.'})"


def check_entry(facts: EntryFacts, evidence: Evidence) -> EntryCheck:
    """Compare one entry with the store (see the module docstring for the rules)."""
    rec, key = facts.record, facts.key
    out = EntryCheck()
    if doi_malformed(facts.raw_doi):
        out.findings.append(
            Finding(
                SUSPECT, key, f"'{key}': the DOI '{facts.raw_doi}' is malformed (a DOI reads 10.NNNN/suffix)"
            )
        )
    if arxiv_malformed(facts.raw_arxiv):
        out.findings.append(
            Finding(SUSPECT, key, f"'{key}': the arXiv id '{facts.raw_arxiv}' is malformed (e.g. 2101.00001)")
        )
    for label, ident, found in (
        ("DOI", rec.doi, evidence.by_doi(rec.doi) if rec.doi else []),
        ("arXiv id", rec.arxiv, evidence.by_arxiv(rec.arxiv) if rec.arxiv else []),
    ):
        # A few identifiers are held by two stored papers (two Anthology papers share a DOI by
        # mistake): the entry is about the one whose title it gives.
        stored = _closest(rec, found, any_title=True)
        if stored is None:
            continue
        out.paper = stored
        out.findings += _by_identifier(facts, stored, label, ident)
        return out
    candidates = evidence.by_title(rec.title) if rec.title and rec.title != key else []
    best = _closest(rec, candidates)
    if best is None:
        if not any(f.code == SUSPECT for f in out.findings):
            out.findings.append(
                Finding(
                    NOT_IN_STORE, key, f"'{key}' matches no paper in the store (by DOI, arXiv id or title)"
                )
            )
        return out
    out.paper = best
    out.findings += _by_title(facts, best)
    return out


_TITLE_ORDER = {"same": 0, "variant": 1, "near": 2, "different": 3}
_AUTHOR_ORDER = {"same": 0, "overlap": 1, "unknown": 2, "disjoint": 3}


def _closest(rec: PaperRecord, candidates: list[StoredPaper], any_title: bool = False) -> StoredPaper | None:
    """The stored paper the entry is about: the closest title (same, variant, near; any title
    when ``any_title``, for papers an identifier already chose), then the closest authors, year
    and venue. Why all of them: a title can be stored many times (54 "Briefly Noted" in the
    ACL Anthology, a paper in two venues), and the entry's own version must be the one compared."""
    ranked = []
    for p in candidates:
        rel = title_relation(rec.title, p.title)
        if rel == "different" and not any_title:
            continue
        gap = abs(rec.year - p.year) if rec.year and p.year else 0
        venue = bool(rec.venue and p.venue and venue_differs(rec.venue, p.venue))
        ranked.append(
            (_TITLE_ORDER[rel], _AUTHOR_ORDER[author_relation(rec.authors, p.authors)], gap, venue, p.id, p)
        )
    return min(ranked, key=lambda r: r[:5])[-1] if ranked else None


def _by_identifier(facts: EntryFacts, stored: StoredPaper, label: str, ident: str) -> list[Finding]:
    """The entry's DOI/arXiv id names ``stored``: another title is a sign of a made-up entry."""
    rec, key = facts.record, facts.key
    rel = title_relation(rec.title, stored.title) if rec.title != key else "same"
    if rel in ("different", "near"):
        return [
            Finding(
                SUSPECT,
                key,
                f"'{key}': {label} {ident} belongs to {describe(stored)}, not to \u201c{rec.title}\u201d",
                stored,
                stored.key or stored.doi,
                replace=True,
                details={"why": "identifier-title", "title": rel},
            )
        ]
    return _compare(facts, stored, rel, tied_by=label)


def _by_title(facts: EntryFacts, stored: StoredPaper) -> list[Finding]:
    """The entry's title matches ``stored`` (no identifier tied them)."""
    rel = title_relation(facts.record.title, stored.title)
    return _compare(facts, stored, rel, tied_by="title")


def _compare(facts: EntryFacts, stored: StoredPaper, rel: str, tied_by: str) -> list[Finding]:
    rec, key = facts.record, facts.key
    authors = author_relation(rec.authors, stored.authors)
    gap = abs(rec.year - stored.year) if rec.year and stored.year else 0
    suspect_why = []
    if authors == "disjoint":
        suspect_why.append(
            f"its authors ({_names(rec.authors)}) are not the paper's ({_names(stored.authors)})"
        )
    if gap >= YEAR_GAP and (tied_by != "title" or authors != "unknown"):
        # A year off by one is a preprint's or an online-first year (a mismatch, below); two or
        # more is not the paper's year. (Where the store holds an extended version of the same
        # title, _closest chose the version nearest the entry's year.) A title tie without
        # authors proves nothing: front matter such as "Briefly Noted" appears every year.
        suspect_why.append(f"its year {rec.year} is not the paper's {stored.year}")
    if rel == "near" and tied_by == "title" and (authors != "same" or gap):
        suspect_why.append("its title is not quite the paper's")
    if suspect_why:
        return [
            Finding(
                SUSPECT,
                key,
                f"'{key}' looks like {describe(stored)}, but " + " and ".join(suspect_why),
                stored,
                stored.key or stored.doi,
                replace=True,
                details={"why": "metadata", "tied_by": tied_by},
            )
        ]
    fields: list[tuple[str, str]] = []
    said: list[str] = []
    if rel in ("variant", "near"):
        fields.append(("title", "{" + tex_title(stored.title) + "}"))
        said.append(f"title \u201c{stored.title}\u201d")
    if rec.year and stored.year and gap:
        fields.append(("year", str(stored.year)))
        said.append(f"year {stored.year}")
    if authors == "overlap" and len(rec.authors) != 1 and not _and_others(rec.authors):
        fields.append(("author", "{" + " and ".join(tex_name(n) for n in stored.authors) + "}"))
        said.append(f"authors {_names(stored.authors)}")
    if rec.venue and stored.venue and venue_differs(rec.venue, stored.venue):
        fields.append((facts.venue_field or "booktitle", "{" + tex_escape(stored.venue) + "}"))
        said.append(f"venue \u201c{stored.venue}\u201d")
    if not said:
        return []
    return [
        Finding(
            MISMATCH,
            key,
            f"'{key}' differs from the stored record of the paper: " + "; ".join(said),
            stored,
            stored.key or stored.doi,
            update=FieldFix(tuple(fields)),
            details={"tied_by": tied_by},
        )
    ]


def _and_others(authors: list[str]) -> bool:
    return any(surname(a) == "others" for a in authors)


def _names(authors: list[str], n: int = 3) -> str:
    names = [surname(a).title() for a in authors[:n]]
    return ", ".join(names) + (" et al." if len(authors) > n else "") if names else "none"
