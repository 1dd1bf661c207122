"""A draft's cited references checked against its ``.bib`` files and the paper store (issue 27).

For each key the draft cites: is it defined (``unknown-key``), defined twice or under two keys
for one paper (``duplicate-entry``), does its entry describe a stored paper truthfully
(``suspect-reference``, ``metadata-mismatch``, ``not-in-store``: :mod:`citewise.models.checks.entries`),
and does the paper fit the sentence that cites it (``unlikely-citation``:
:mod:`citewise.models.checks.fit`). No LSP types: the language server and ``citewise check``
both run :class:`ReferenceChecker` over a :class:`~.documents.DraftView`.

Why a long-lived object: the entry checks are cached by the entry's text (and the store's
generation), the fit scores by their context, so re-checking after an edit only does the work
the edit made new.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from citewise.indexer.bm25 import BM25Index
from citewise.indexer.braces import closing_brace
from citewise.indexer.store import StoredPaper
from citewise.models.checks.entries import EntryCheck, check_entry, describe, read_entry
from citewise.models.checks.evidence import StoreEvidence
from citewise.models.checks.findings import (
    CHECKS,
    DUPLICATE,
    SUSPECT,
    UNKNOWN_KEY,
    UNLIKELY,
    Finding,
)
from citewise.models.checks.fit import CitationFit
from citewise.models.recommender import Recommender

from . import draft
from .bibfiles import iter_entries
from .bibindex import key_for_paper
from .documents import DraftView

# A draft whose thousands of keys are all missing (no .bib found) would otherwise get a finding
# for each on every pause in typing; the first ones say what is wrong.
MAX_FINDINGS = 1000


class Findings(list):
    """The findings of one :meth:`ReferenceChecker.check`, with what the cap left out.

    Why: past :data:`MAX_FINDINGS` the check stops, and ``citewise check`` printed "1000
    findings" for a draft with 5,000 missing keys, as if that were all. ``not_shown`` counts the
    missing keys past the cap (one each, as a report lists them); ``unchecked`` the citations of
    keys the ``.bib`` holds that were not checked at all."""

    not_shown: int = 0
    unchecked: int = 0


@dataclass(frozen=True)
class EntrySpan:
    """Where one entry stands in its ``.bib`` text: ``text[start:end]`` is the whole entry."""

    path: str
    start: int
    end: int
    line: int  # 0-based line of the @type


@dataclass
class CitedFinding:
    """A finding at one cited key of the draft (``key_index`` into ``citation.keys``)."""

    citation: draft.Citation
    key_index: int
    finding: Finding
    span: EntrySpan | None = None  # the entry the finding is about, where it is in a .bib
    suggested_key: str = ""  # how the draft would cite the suggested paper

    @property
    def key(self) -> draft.CiteKey:
        return self.citation.keys[self.key_index]


@dataclass
class _BibScan:
    """Entry spans and duplicated keys of one ``.bib`` text (cached by the text)."""

    spans: dict[str, EntrySpan] = field(default_factory=dict)
    twice: dict[str, list[int]] = field(default_factory=dict)  # key -> 0-based lines of each definition


def scan_bib(path: str, text: str) -> _BibScan:
    out = _BibScan()
    for e in iter_entries(text):
        if e.key in out.spans:
            out.twice.setdefault(e.key, [out.spans[e.key].line]).append(e.line)
            continue
        opener = text.rfind("{", e.start, e.body_start)
        if opener == -1:
            opener = text.rfind("(", e.start, e.body_start)
        close = closing_brace(text, opener, 200_000) if text[opener] == "{" else text.find(")", e.body_start)
        end = (close + 1) if close is not None and close != -1 else len(text)
        out.spans[e.key] = EntrySpan(path, e.start, end, e.line)
    return out


class ReferenceChecker:
    """Runs the checks for drafts, over the recommender being served (swapped with it)."""

    def __init__(self, recommender: Recommender, cache_size: int = 20_000) -> None:
        self.rec = recommender
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple, EntryCheck | None] = OrderedDict()
        self._scans: OrderedDict[tuple[str, int], _BibScan] = OrderedDict()
        self._size = cache_size
        self._fit: CitationFit | None = None
        self._generation = -1
        self._style = "lastnameYEARfirstword"

    # -- caches ---------------------------------------------------------------------------------
    def _fresh(self) -> None:
        gen = self.rec.store.generation
        if gen != self._generation:
            with self._lock:
                self._entries.clear()
                self._generation = gen

    def fit(self) -> CitationFit | None:
        """Fit scores over the served BM25 index (None with a remote engine: no local index)."""
        bm25 = self.rec.bm25
        if not isinstance(bm25, BM25Index):
            return None
        if self._fit is None or self._fit.bm25 is not bm25:
            self._fit = CitationFit(bm25)
        return self._fit

    def _scan(self, path: str, text: str) -> _BibScan:
        key = (path, hash(text))
        with self._lock:
            hit = self._scans.get(key)
        if hit is None:
            hit = scan_bib(path, text)
            with self._lock:
                self._scans[key] = hit
                while len(self._scans) > 16:
                    self._scans.popitem(last=False)
        return hit

    def check_entry_text(self, text: str, own: tuple[str, ...]) -> EntryCheck | None:
        """The entry check of one entry's text (cached by text, own sources and store generation)."""
        ck = (text, own)
        with self._lock:
            if ck in self._entries:
                self._entries.move_to_end(ck)
                return self._entries[ck]
        facts = read_entry(text)
        out = check_entry(facts, StoreEvidence(self.rec.store, own)) if facts is not None else None
        with self._lock:
            self._entries[ck] = out
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return out

    # -- the checks -----------------------------------------------------------------------------
    def check(
        self,
        view: DraftView,
        enabled: dict[str, bool] | None = None,
        context_chars: int = 400,
        key_style: str = "lastnameYEARfirstword",
    ) -> list[CitedFinding]:
        """Every finding about the keys ``view`` cites, in draft order (placeholders aside);
        ``key_style`` makes the keys of suggested papers that the .bib does not hold yet."""
        self._fresh()
        self._style = key_style
        on = {code: (enabled or {}).get(code, default) for code, (_s, default) in CHECKS.items()}
        own = tuple(sorted(p for p, t in view.bib_texts.items() if t is not None))
        scans = {p: self._scan(p, t) for p, t in view.bib_texts.items() if t is not None}
        cited = [
            (cit, i, k.key)
            for cit in view.citations()
            for i, k in enumerate(cit.keys)
            if not k.placeholder and k.key
        ]
        unknown = [key for _c, _i, key in cited if key not in view.bib]
        known = self.rec.library.by_keys(unknown[:MAX_FINDINGS]) if unknown and on[UNKNOWN_KEY] else {}
        dups = _duplicates(view, scans) if on[DUPLICATE] else {}
        out: list[CitedFinding] = []
        entry_of: dict[str, tuple[EntryCheck | None, EntrySpan | None]] = {}
        rest: list[tuple[draft.Citation, int, str]] = []
        for n, (cit, i, key) in enumerate(cited):
            if len(out) >= MAX_FINDINGS:
                rest = cited[n:]
                break
            if key not in view.bib:
                if on[UNKNOWN_KEY]:
                    out.append(CitedFinding(cit, i, _unknown(key, known.get(key))))
                continue
            checked, span = self._entry_of(view, key, scans, own, entry_of)
            if key in dups:
                dup = _trusted_suggestion(
                    dups[key], lambda k: self._entry_of(view, k, scans, own, entry_of)[0]
                )
                out.append(CitedFinding(cit, i, dup, span))
            for f in checked.findings if checked else []:
                if on.get(f.code, False):
                    out.append(CitedFinding(cit, i, f, span, self._key_for(view, f.paper, key)))
        if on[UNLIKELY]:
            out += self._unlikely(view, cited, entry_of, context_chars, len(out))
        out.sort(key=lambda f: (f.citation.start, f.key_index))
        return _past_cap(Findings(out), view, rest, on[UNKNOWN_KEY])

    def _entry_of(
        self,
        view: DraftView,
        key: str,
        scans: dict[str, _BibScan],
        own: tuple[str, ...],
        entry_of: dict[str, tuple[EntryCheck | None, EntrySpan | None]],
    ) -> tuple[EntryCheck | None, EntrySpan | None]:
        """The entry check of ``key``'s ``.bib`` entry and where it stands (cached in ``entry_of``)."""
        if key not in entry_of:
            path = view.bib.files.get(key, "")
            span = scans[path].spans.get(key) if path in scans else None
            text = view.bib_texts.get(path) or ""
            checked = self.check_entry_text(text[span.start : span.end], own) if span else None
            entry_of[key] = (checked, span)
        return entry_of[key]

    def _key_for(self, view: DraftView, paper: StoredPaper | None, cited: str = "") -> str:
        """How the draft would cite ``paper`` ("" when that is the cited key itself: nothing to suggest)."""
        key = key_for_paper(paper, view.bib, self._style).key if paper is not None else ""
        return "" if key == cited else key

    def _unlikely(
        self,
        view: DraftView,
        cited: list[tuple[draft.Citation, int, str]],
        entry_of: dict[str, tuple[EntryCheck | None, EntrySpan | None]],
        context_chars: int,
        so_far: int,
    ) -> list[CitedFinding]:
        fit = self.fit()
        if fit is None:
            return []
        library = self.rec.library
        papers: dict[str, StoredPaper | None] = {}
        for _c, _i, key in cited:
            if key in papers or key not in view.bib:
                continue
            checked = entry_of.get(key, (None, None))[0]
            if checked is not None and any(f.code == SUSPECT for f in checked.findings):
                papers[key] = None  # already reported as made up: its fit says nothing more
                continue
            # Only a paper that a source other than the draft's own .bib describes: an entry the
            # store knows only from that .bib (imported by the server) is often a title alone, and
            # a title alone fits no sentence well (a false alarm on the user's own paper).
            papers[key] = checked.paper if checked else None
        out: list[CitedFinding] = []
        for cit, i, key in cited:
            paper = papers.get(key)
            if paper is None or so_far + len(out) >= MAX_FINDINGS:
                continue
            marked = draft.marked_local_context(view.text, cit.start, view.lang, context_chars)
            got = fit.fit(view.query_for(marked), paper.id)
            if got is None or not got.unlikely or got.best == paper.id:
                continue
            best = library.get(got.best)
            if best is None:
                continue
            msg = (
                f"'{key}' fits this sentence poorly (fit {got.ratio:.2f}): "
                f"this sentence reads like {describe(best)}"
            )
            f = Finding(UNLIKELY, key, msg, best, best.key or best.doi, details={"fit": round(got.ratio, 4)})
            out.append(CitedFinding(cit, i, f, entry_of.get(key, (None, None))[1], self._key_for(view, best)))
        return out


def _unknown(key: str, paper: StoredPaper | None) -> Finding:
    msg = f"'{key}' is not in the bibliography"
    if paper is not None:
        msg += f" (the store knows it: {paper.title}; use the code action to add the entry)"
    return Finding(UNKNOWN_KEY, key, msg, paper, paper.key if paper else "")


def _duplicates(view: DraftView, scans: dict[str, _BibScan]) -> dict[str, Finding]:
    """``duplicate-entry`` findings by key: a key defined twice, or one paper under two keys."""
    out: dict[str, Finding] = {}
    for path, scan in scans.items():
        for key, lines in scan.twice.items():
            where = ", ".join(f"line {n + 1}" for n in lines)
            out[key] = Finding(
                DUPLICATE,
                key,
                f"'{key}' is defined {len(lines)} times in {Path(path).name} ({where}); BibTeX uses the first",
            )
    out.update(_across_files(view, scans, set(out)))
    groups: dict[tuple[str, str], list[str]] = {}
    for key, ids in view.bib.entries.items():
        for kind, value in (("DOI", ids.doi), ("arXiv id", ids.arxiv), ("title", ids.norm_title)):
            if value and (kind != "title" or len(value) > 12):
                groups.setdefault((kind, value), []).append(key)
    for (kind, value), keys in groups.items():
        if kind == "title":
            # One title under two different DOIs is two publications (a reprint, a journal
            # version), not one entry written twice: only entries without a DOI of their own count.
            dois = {view.bib.entries[k].doi for k in keys} - {""}
            keys = keys if len(dois) <= 1 else [k for k in keys if not view.bib.entries[k].doi]
        if len(keys) < 2:
            continue
        for key in keys:
            if key in out:
                continue
            others = ", ".join(f"'{k}'" for k in keys if k != key)
            shown = value if kind != "title" else f"\u201c{view.bib.entries[key].title}\u201d"
            out[key] = Finding(
                DUPLICATE,
                key,
                f"'{key}' and {others} are the same paper (same {kind}: {shown})",
                suggested=next(k for k in keys if k != key),
                details={"same_as": [k for k in keys if k != key]},
            )
    return out


def _across_files(view: DraftView, scans: dict[str, _BibScan], done: set[str]) -> dict[str, Finding]:
    """A key defined in two of the draft's ``.bib`` files: BibTeX (and citewise) use the first
    file's entry, silently; say so where the two entries differ (the same text twice is harmless)."""
    out: dict[str, Finding] = {}
    first: dict[str, tuple[str, str]] = {}  # key -> (path, entry text) of its first definition
    for path, scan in scans.items():
        text = view.bib_texts.get(path) or ""
        for key, span in scan.spans.items():
            entry = " ".join(text[span.start : span.end].split())
            if key not in first:
                first[key] = (path, entry)
                continue
            used, used_entry = first[key]
            if key in done or key in out or entry == used_entry:
                continue
            out[key] = Finding(
                DUPLICATE,
                key,
                f"'{key}' is defined differently in {Path(used).name} and {Path(path).name}; "
                f"BibTeX uses the one in {Path(used).name} (line {scans[used].spans[key].line + 1})",
            )
    return out


def _trusted_suggestion(finding: Finding, entry: Callable[[str], EntryCheck | None]) -> Finding:
    """A ``duplicate-entry`` finding whose suggestion never points at a made-up entry.

    Two entries that share a DOI are often a genuine one and a made-up one reusing its DOI;
    "use the other key" must then point from the made-up entry to the genuine one, never back.
    An entry is *suspect* when its own check says so (``suspect-reference``) and *confirmed*
    when the store holds the paper it describes and nothing is suspect about it. The suggestion
    is a confirmed other entry when there is one; no suggestion when this entry is the only
    confirmed one (keep it) or every other entry is suspect; else, as before, the first other
    entry that is not suspect."""
    others = finding.details.get("same_as") or []
    if not others:
        return finding

    def suspect(key: str) -> bool:
        checked = entry(key)
        return checked is not None and any(f.code == SUSPECT for f in checked.findings)

    def confirmed(key: str) -> bool:
        checked = entry(key)
        return checked is not None and checked.paper is not None and not suspect(key)

    trusted = [k for k in others if confirmed(k)]
    plain = [k for k in others if not suspect(k)]
    if trusted:
        pick = trusted[0]
    elif confirmed(finding.key) or not plain:
        pick = ""
    else:
        pick = plain[0]
    if pick == finding.suggested:
        return finding
    message = finding.message
    if not pick and confirmed(finding.key):
        message += f"; keep '{finding.key}': the store confirms it"
    return replace(finding, suggested=pick, message=message)


def _past_cap(
    found: Findings, view: DraftView, rest: list[tuple[draft.Citation, int, str]], unknown_on: bool
) -> Findings:
    """Count what the cap left out of ``found``: missing keys not listed yet, unchecked citations."""
    listed = {f.finding.key for f in found if f.finding.code == UNKNOWN_KEY}
    missing = {key for _c, _i, key in rest if key not in view.bib and key not in listed}
    found.not_shown = len(missing) if unknown_on else 0
    found.unchecked = sum(1 for _c, _i, key in rest if key in view.bib)
    return found


def first_per_key(found: Iterable[CitedFinding]) -> list[CitedFinding]:
    """One finding per (key, code) for an entry-level check, at the key's first citation; every
    ``unlikely-citation`` stays (it is about one sentence): what a report lists."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in found:
        if f.finding.code != UNLIKELY:
            tag = (f.finding.key, f.finding.code)
            if tag in seen:
                continue
            seen.add(tag)
        out.append(f)
    return out
