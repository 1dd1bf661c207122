"""Filters at import (``citewise index --years --field --venue --around``): which records of a
dump reach the store.

Why at import: nobody wants 250M works; a user wants their field since 2015, or the papers one
hop around their own library. Filtering while streaming keeps a record that fails out of the
store entirely (it is counted, never written), so a store sized for a laptop comes straight from
the dump without a first full import.

Why pure: the filter only looks at the record it is given (year, subjects, venue, ids,
references) and at the sets it holds, so it is tested without files, the estimate can run it on a
sample without side effects, and the importer decides where it applies (``indexer/importer.py``
applies it in its record loop; the library behind ``--around`` is read by
``indexer/filter_seeds.py``).

What each filter reads from a :class:`~citewise.indexer.records.PaperRecord`:

- ``--years``: ``year``; a record without a year fails.
- ``--field``: ``subjects`` (arXiv categories, OpenAlex topics with their subfield, field and
  domain, and concepts; S2 fields of study; Crossref subjects), else the arXiv ``categories`` in
  ``extra`` and the ``keywords`` (JSON Lines); case-insensitive. ``cs`` matches ``cs`` and every
  ``cs.*`` category; ``cs.*`` or ``Computer*`` match by prefix; anything else matches whole.
- ``--venue``: a case-insensitive substring of ``venue``.
- ``--around``: see :class:`Neighbourhood`.

Every given filter must pass; the values of one repeated option are alternatives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .records import PaperRecord, normalize_title
from .sources.ids import split_doi

_YEARS = re.compile(r"\s*(\d{4})?\s*(-)?\s*(\d{4})?\s*")
_ARXIV_DOI = "10.48550/arxiv."
MIN_TITLE_WORDS = 4  # a library title shorter than this ("Introduction") names no paper by itself


@dataclass(frozen=True)
class YearRange:
    """Years ``first`` to ``last``, both included; ``None`` leaves that end open."""

    first: int | None = None
    last: int | None = None

    def __contains__(self, year: object) -> bool:
        if not isinstance(year, int):
            return False
        return (self.first is None or year >= self.first) and (self.last is None or year <= self.last)

    def __str__(self) -> str:
        if self.first == self.last:
            return str(self.first)
        return f"{self.first or ''}-{self.last or ''}"


def parse_years(text: str) -> YearRange:
    """``2015-2024``, ``2015-`` (from 2015), ``-2010`` (up to 2010) or ``2019``; raises
    ``ValueError`` with the forms it takes."""
    m = _YEARS.fullmatch(text or "")
    first, dash, last = m.groups() if m else (None, None, None)
    if not m or not (first or last) or (first and last and not dash):
        raise ValueError(f"expected a year or a range like 2015-2024, 2015- or -2010, got {text!r}")
    if not dash:
        return YearRange(int(first), int(first))  # type: ignore[arg-type]
    lo, hi = (int(first) if first else None), (int(last) if last else None)
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"the range {text!r} ends before it starts")
    return YearRange(lo, hi)


def field_matches(pattern: str, value: str) -> bool:
    """Whether one lower-cased ``--field`` pattern matches one lower-cased subject."""
    if pattern.endswith("*"):
        return value.startswith(pattern[:-1])
    return value == pattern or value.startswith(pattern + ".")


def subjects_of(record: PaperRecord) -> list[str]:
    """What ``--field`` matches: the reader's subjects, else arXiv categories and keywords."""
    if record.subjects:
        return record.subjects
    found = record.extra.get("categories", "").split()
    found += [k.strip() for k in record.keywords.split(",") if k.strip()]
    return found


def record_refs(record: PaperRecord) -> set[str]:
    """Every id of a record, spelled as refs (DOI, arXiv id, Anthology id, ``scheme:value``); an
    arXiv DataCite DOI (``10.48550/arXiv.1706.03762``: arXiv's own BibTeX) also as the arXiv id."""
    refs = set(record.ids)
    refs.update(x for x in (record.doi, record.arxiv, record.acl_id) if x)
    if record.doi.startswith(_ARXIV_DOI):
        refs.add(split_doi(record.doi)[1])
    return refs


def title_key(title: str) -> str:
    """A title as ``--around`` matches it (normalised; ``""`` when too short to name a paper)."""
    norm = normalize_title(title)
    return norm if norm.count(" ") + 1 >= MIN_TITLE_WORDS else ""


@dataclass
class Neighbourhood:
    """``--around``: the library's papers (the seeds) and the papers one hop from them.

    A record passes when one of its ids is a seed's or a known neighbour's, when its title is a
    library paper's, or when it cites a seed (its ``references``). A citation row passes when one
    of its ends is a seed. What the import meets teaches the sets (:meth:`learn`): a seed's record
    gives the seeds its other ids (an S2 corpus id, an OpenAlex W id: how S2AG citation rows,
    which name papers by corpus id alone, reach a ``.bib`` library) and the neighbours the papers
    it cites; a neighbour's record gives the neighbours its other ids; a citation row with a seed
    end makes its other end a neighbour. What is learned applies from then on; what the store
    already knows is read before the import (``filter_seeds.learn_from_store``), so running the
    same command again adds what was learned too late for the first run (``late``).
    """

    seeds: set[str] = field(default_factory=set)
    near: set[str] = field(default_factory=set)
    titles: set[str] = field(default_factory=set)
    late: set[str] = field(default_factory=set)  # neighbours learned during the import

    def is_seed(self, refs: set[str], record: PaperRecord) -> bool:
        if not refs.isdisjoint(self.seeds):
            return True
        return bool(self.titles) and title_key(record.title) in self.titles

    def admits(self, record: PaperRecord) -> bool:
        """Whether ``record`` is a library paper or one hop from one (no side effects)."""
        refs = record_refs(record)
        if self.is_seed(refs, record) or not refs.isdisjoint(self.near):
            return True
        return any(ref in self.seeds for ref in record.references)

    def learn(self, record: PaperRecord) -> None:
        """Grow the sets from one record met in the import (whether or not it was kept)."""
        refs = record_refs(record)
        if self.is_seed(refs, record):
            self.seeds.update(refs)
            self._add_near(r for r in record.references if r not in self.seeds)
        elif not refs.isdisjoint(self.near) or any(ref in self.seeds for ref in record.references):
            self.near.update(refs)

    def admits_edge(self, citing: str, cited: str) -> bool:
        return citing in self.seeds or cited in self.seeds

    def learn_edge(self, citing: str, cited: str) -> None:
        if citing in self.seeds and cited not in self.seeds:
            self._add_near((cited,))
        elif cited in self.seeds and citing not in self.seeds:
            self._add_near((citing,))

    def _add_near(self, refs: Iterable[str]) -> None:
        for ref in refs:
            if ref not in self.near:
                self.near.add(ref)
                self.late.add(ref)


@dataclass
class ImportFilter:
    """The filters of one ``citewise index`` run; an empty one passes everything."""

    years: YearRange | None = None
    fields: tuple[str, ...] = ()  # lower-cased patterns
    venues: tuple[str, ...] = ()  # lower-cased substrings
    around: Neighbourhood | None = None

    @classmethod
    def build(
        cls,
        years: str | None = None,
        fields: Iterable[str] = (),
        venues: Iterable[str] = (),
        around: Neighbourhood | None = None,
    ) -> ImportFilter:
        """From the command-line values (raises ``ValueError`` for a bad ``--years`` or an empty
        ``--field`` / ``--venue``)."""
        pats = tuple(f.strip().lower() for f in fields)
        subs = tuple(v.strip().lower() for v in venues)
        if "" in pats or "" in subs:
            raise ValueError("--field and --venue need a value (an empty one would match nothing)")
        try:
            span = parse_years(years) if years else None
        except ValueError as exc:
            raise ValueError(f"--years: {exc}") from None
        return cls(span, pats, subs, around)

    @property
    def active(self) -> bool:
        return bool(self.years or self.fields or self.venues or self.around is not None)

    @property
    def by_content(self) -> bool:
        """Whether a record's own fields decide (year, field, venue), not only ``--around``."""
        return bool(self.years or self.fields or self.venues)

    def passes(self, record: PaperRecord) -> bool:
        """Whether ``record`` goes into the store (pure: nothing is learned)."""
        if self.years is not None and record.year not in self.years:
            return False
        if self.fields and not any(
            field_matches(p, s.lower()) for s in subjects_of(record) for p in self.fields
        ):
            return False
        if self.venues:
            venue = record.venue.lower()
            if not any(v in venue for v in self.venues):
                return False
        return self.around is None or self.around.admits(record)

    def passes_edge(self, citing: str, cited: str, kept: Callable[[str], bool]) -> bool:
        """Whether a citation row (citing ref -> cited ref) goes into the store.

        ``--around``: one end is a seed. Year, field and venue are properties of papers, and a
        row names its papers by id only: the row passes when both of its papers are known to
        pass, that is ``kept`` (in the store: kept by this import or an earlier one). A row
        whose papers were never imported is left out: nothing says they would pass."""
        if self.around is not None and not self.around.admits_edge(citing, cited):
            return False
        return not self.by_content or (kept(citing) and kept(cited))

    def describe(self) -> str:
        """The filters as the user gave them, for messages."""
        parts = []
        if self.years is not None:
            parts.append(f"--years {self.years}")
        parts += [f"--field {f}" for f in self.fields]
        parts += [f"--venue {v}" for v in self.venues]
        if self.around is not None:
            parts.append(f"--around ({len(self.around.seeds):,} library ids)")
        return " ".join(parts)
