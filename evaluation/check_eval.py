"""``citewise eval check``: how well the reference checks of issue 27 catch what they are for.

Three measurements, all seeded and deterministic (docs/checks.md has the figures):

* **unlikely-citation** (``models/checks/fit.py``): every (dev citing sentence, cited paper of the
  store) is a trial of its true citation and of three swaps: a random paper of the collection, a
  random paper of the true one's venue (the same venue string: proceedings of one year), and the
  top BM25 paper of the local+title view that the sentence does not cite. Each gets the fit ratio;
  a trial that cannot be judged (``Fit`` None) is never flagged. Reported: detection per swap
  kind at the shipped threshold (and the false alarms it costs on the true citations), at fixed
  false-alarm rates (thresholds from the true citations' scores), and the whole curve.
* **suspect-reference** (``models/checks/entries.py``): entries fabricated from the real entries
  of the cited papers (``format_entry`` of the stored paper), one change each: title words
  replaced, another paper's authors, a wrong year, another stored paper's DOI, a malformed DOI.
  Reported per kind: flagged ``suspect-reference``, flagged by any finding, and among the entries
  the check tied to a stored paper (by DOI, arXiv id or title).
* **false flags**: unmodified real entries checked against the store, every finding counted,
  with examples.

Pure of the command line: the CLI opens the store and the dev sets and hands them in.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import numpy as np

from citewise.indexer.bibtex_writer import format_entry
from citewise.indexer.records import PaperRecord, normalize_doi, normalize_title
from citewise.models.checks.entries import (
    EntryCheck,
    Evidence,
    check_entry,
    read_entry,
    surname,
    title_relation,
)
from citewise.models.checks.findings import MISMATCH, NOT_IN_STORE, SUSPECT
from citewise.models.checks.fit import THRESHOLD
from citewise.models.prefetch import view_text
from citewise.models.query import ContextQuery

T = TypeVar("T")  # sample_others keeps the type of what it samples
SWAPS = ("random", "venue", "bm25")
FA_RATES = (0.01, 0.02, 0.05)
CURVE_STEP = 0.005  # false-alarm grid of the curve
FABRICATIONS = ("title", "authors", "year", "doi-other", "doi-malformed")
# How the year kind is reported: a year off by one is a preprint/proceedings difference by the
# rules' design (YEAR_GAP), so it is kept apart.
FAB_ROWS = ("title", "authors", "year±1", "year±2..5", "doi-other", "doi-malformed")
# The same changes to an entry without its DOI (of the papers that have one): tied by title alone,
# as a made-up reference usually is, and as most ACL entries are.
NO_DOI = " (no DOI)"
NO_DOI_KINDS = ("title", "authors", "year")
ALL_ROWS = FAB_ROWS + tuple(k + NO_DOI for k in ("title", "authors", "year±1", "year±2..5"))
DOI_CORRUPTIONS = ("prefix-cut", "no-10", "no-suffix", "doi-inside")
_BM25_DEPTH = 50

# -- unlikely-citation ------------------------------------------------------------------------


@dataclass(frozen=True)
class CitingSentence:
    """One dev citing sentence: its query, the store ids it cites, and the citing paper's id."""

    qid: str
    query: ContextQuery
    cited: tuple[int, ...]
    citing: int | None = None


@dataclass(frozen=True)
class Trial:
    """One scored (sentence, paper): ``kind`` is ``true`` or a swap kind; ratio None = not judged."""

    qid: str
    kind: str
    paper_id: int
    ratio: float | None


@dataclass
class Pools:
    """Where swapped papers come from: the collection's ids, and its ids by venue."""

    collection: list[int]
    venue_of: dict[int, str]
    by_venue: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.collection = sorted(self.collection)
        self.members = set(self.collection)
        if not self.by_venue:
            for pid in self.collection:
                v = self.venue_of.get(pid, "")
                if v:
                    self.by_venue.setdefault(v, []).append(pid)


def pools_from_store(store, collection: Iterable[int]) -> Pools:
    """The pools over ``collection`` (store ids), with the store's venue strings."""
    ids = set(collection)
    venue_of = {pid: v for pid, v in store.conn.execute("SELECT id, venue FROM papers") if pid in ids}
    return Pools(sorted(ids), venue_of)


def _draw(rng: random.Random, pool: Sequence[int], avoid: set[int], tries: int = 50) -> int | None:
    """A random member of ``pool`` not in ``avoid`` (None when the pool has none)."""
    for _ in range(tries):
        pid = pool[rng.randrange(len(pool))] if pool else None
        if pid is None:
            return None
        if pid not in avoid:
            return pid
    rest = [p for p in pool if p not in avoid]
    return rng.choice(rest) if rest else None


def swapped_papers(
    rng: random.Random, true_id: int, avoid: set[int], pools: Pools, bm25_top: Sequence[int]
) -> dict[str, int | None]:
    """The three swaps of one true citation (None: no such paper). ``avoid``: the sentence's
    cited papers and the citing paper; ``bm25_top``: store ids by the local+title view, best first."""
    venue = pools.venue_of.get(true_id, "")
    return {
        "random": _draw(rng, pools.collection, avoid),
        "venue": _draw(rng, pools.by_venue.get(venue, []), avoid) if venue else None,
        "bm25": next((p for p in bm25_top if p not in avoid and p in pools.members), None),
    }


def bm25_top(bm25, query: ContextQuery, depth: int = _BM25_DEPTH) -> list[int]:
    """Store ids of the local+title view's top ``depth`` papers, best first (ties by position)."""
    scores = bm25.scores(view_text(query, "local+title"))
    if scores.size == 0:
        return []
    depth = min(depth, scores.size)
    head = np.argpartition(-scores, depth - 1)[:depth]
    head = head[np.lexsort((head, -scores[head]))]
    return [int(bm25.doc_ids[i]) for i in head if scores[i] > 0]


def citation_trials(
    sentences: Iterable[CitingSentence],
    fit,
    bm25,
    pools: Pools,
    seed: int = 0,
    tick: Callable[[], None] | None = None,
) -> list[Trial]:
    """The true citation and its swaps for every cited paper of every sentence, scored by
    ``fit`` (a :class:`~citewise.models.checks.fit.CitationFit`)."""
    rng = random.Random(seed)
    trials: list[Trial] = []

    def score(qid: str, kind: str, query: ContextQuery, pid: int) -> None:
        got = fit.fit(query, pid)
        trials.append(Trial(qid, kind, pid, None if got is None else got.ratio))

    for s in sentences:
        avoid = set(s.cited) | ({s.citing} if s.citing is not None else set())
        top = bm25_top(bm25, s.query)
        for true_id in s.cited:
            score(s.qid, "true", s.query, true_id)
            for kind, pid in swapped_papers(rng, true_id, avoid, pools, top).items():
                if pid is not None:
                    score(s.qid, kind, s.query, pid)
        if tick is not None:
            tick()
    return trials


def flagged(ratio: float | None, threshold: float) -> bool:
    return ratio is not None and ratio < threshold


def flag_rate(ratios: Sequence[float | None], threshold: float) -> float:
    return sum(flagged(r, threshold) for r in ratios) / len(ratios) if ratios else 0.0


def threshold_at(true_ratios: Sequence[float | None], rate: float) -> float:
    """The highest threshold (flag when ratio < it) that flags at most ``rate`` of the true
    citations: the (k+1)-th smallest judged true score, k = floor(rate * all true citations).
    ``inf`` when every judged one may be flagged."""
    judged = sorted(r for r in true_ratios if r is not None)
    k = math.floor(rate * len(true_ratios) + 1e-9)
    return judged[k] if k < len(judged) else math.inf


def _jsonable(x: float) -> float | None:
    return None if math.isinf(x) else round(x, 4)


def summarise_trials(trials: Sequence[Trial], rates: Sequence[float] = FA_RATES) -> dict:
    """Detection per swap kind at the shipped threshold, at each false-alarm rate, and the curve."""
    by_kind: dict[str, list[float | None]] = {"true": [], **{k: [] for k in SWAPS}}
    for t in trials:
        by_kind.setdefault(t.kind, []).append(t.ratio)
    true = by_kind["true"]

    def point(threshold: float) -> dict:
        return {
            "threshold": _jsonable(threshold),
            "false_alarms": round(flag_rate(true, threshold), 4),
            "detection": {k: round(flag_rate(by_kind[k], threshold), 4) for k in SWAPS},
        }

    grid = [round(i * CURVE_STEP, 4) for i in range(int(round(1 / CURVE_STEP)) + 1)]
    curve = [point(threshold_at(true, r)) | {"rate": r} for r in grid]
    return {
        "shipped_threshold": THRESHOLD,
        "trials": {k: len(v) for k, v in by_kind.items()},
        "not_judged": {k: sum(r is None for r in v) for k, v in by_kind.items()},
        "at_shipped_threshold": point(THRESHOLD),
        "at_rates": [point(threshold_at(true, r)) | {"rate": r} for r in rates],
        "curve": curve,
    }


# -- fabricated entries -----------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*[A-Za-z]|[A-Za-z]")
STOPWORDS = frozenset(
    "a an and are as at be by for from how in into is it its of on or over the their to under "
    "via vs what when where which while who why with without using toward towards through".split()
)


def content_words(title: str) -> list[re.Match]:
    """The title's content words (3+ letters, not a stop word), as matches (their spans)."""
    return [m for m in _WORD.finditer(title) if len(m.group()) >= 3 and m.group().lower() not in STOPWORDS]


def change_title(title: str, donors: Sequence[str], rng: random.Random) -> str | None:
    """``title`` with about a third of its content words (at least 2) replaced by content words of
    the ``donors`` titles that it lacks; None when it has fewer than 2 or the donors too few."""
    words = content_words(title)
    if len(words) < 2:
        return None
    n = max(2, round(len(words) / 3))
    own = {m.group().lower() for m in words}
    pool: list[str] = []
    for d in donors:
        pool += [
            m.group() for m in content_words(d) if m.group().lower() not in own | {w.lower() for w in pool}
        ]
    if len(pool) < n:
        return None
    chosen = sorted(rng.sample(range(len(words)), n))
    new_words = rng.sample(pool, n)
    out, last = [], 0
    for i, w in zip(chosen, new_words, strict=True):
        out += [title[last : words[i].start()], w]
        last = words[i].end()
    return "".join(out) + title[last:]


def shift_year(year: int, rng: random.Random) -> tuple[int, int]:
    """``(year + d, d)`` with d uniform over ±1..±5."""
    d = rng.choice((-5, -4, -3, -2, -1, 1, 2, 3, 4, 5))
    return year + d, d


def corrupt_doi(doi: str, how: str) -> str:
    """A malformed spelling of ``doi`` (10.NNNN/suffix) as found in the wild: the registrant code
    cut short (``10.11/...``), ``10.`` missing, the suffix missing, or a ``doi: `` label written
    inside a resolver URL."""
    prefix, _, suffix = doi.partition("/")
    registrant = prefix[3:] if prefix.startswith("10.") else prefix
    if how == "prefix-cut":
        return f"10.{registrant[:2]}/{suffix}"
    if how == "no-10":
        return f"{registrant}/{suffix}"
    if how == "no-suffix":
        return f"10.{registrant}/"
    if how == "doi-inside":
        return f"https://doi.org/doi: {doi}"
    raise ValueError(f"unknown DOI corruption {how!r}")


def disjoint_authors(a: Sequence[str], b: Sequence[str]) -> bool:
    sa, sb = {surname(x) for x in a} - {""}, {surname(x) for x in b} - {""}
    return bool(sa) and bool(sb) and not sa & sb


@dataclass(frozen=True)
class Fabricated:
    """One fabricated entry: its kind (a :data:`FAB_ROWS` name), the paper it was made from,
    the entry text, and what was changed (for examples)."""

    kind: str
    source_id: int
    text: str
    detail: str = ""


def _with_doi_field(text: str, value: str) -> str:
    """The entry text with its ``doi`` field set to ``value`` (written raw, added when absent)."""
    line = f"  doi = {{{value}}}"
    if re.search(r"(?m)^  doi = ", text):
        return re.sub(r"(?m)^  doi = .*?(,?)$", lambda m: line + m.group(1), text, count=1)
    return re.sub(r"\n\}\s*$", f",\n{line}\n}}\n", text)


class Fabricator:
    """Fabricated entries from real papers; ``others`` draws the papers whose titles, authors or
    DOIs are borrowed (a callable returning a random stored paper)."""

    def __init__(self, rng: random.Random, others: Callable[[], PaperRecord]) -> None:
        self.rng, self.others = rng, others

    def _other(self, ok: Callable[[PaperRecord], bool], tries: int = 100) -> PaperRecord | None:
        for _ in range(tries):
            p = self.others()
            if ok(p):
                return p
        return None

    def make(self, paper: PaperRecord, pid: int, kind: str) -> Fabricated | None:
        key = f"fab{pid}"
        rec = replace(paper, bibtex="", key=key)
        if kind == "title":
            donors = [p.title for p in (self.others() for _ in range(3))]
            title = change_title(paper.title, donors, self.rng)
            if not title:
                return None
            return Fabricated(kind, pid, format_entry(replace(rec, title=title), key), title)
        if kind == "authors":
            other = self._other(lambda p: disjoint_authors(p.authors, paper.authors))
            if other is None:
                return None
            return Fabricated(
                kind, pid, format_entry(replace(rec, authors=other.authors), key), str(other.authors)
            )
        if kind == "year":
            if not paper.year:
                return None
            year, d = shift_year(paper.year, self.rng)
            row = "year±1" if abs(d) == 1 else "year±2..5"
            return Fabricated(row, pid, format_entry(replace(rec, year=year), key), f"{d:+d}")
        if kind == "doi-other":
            other = self._other(
                lambda p: (
                    bool(p.doi) and p.doi != paper.doi and title_relation(p.title, paper.title) == "different"
                )
            )
            if other is None:
                return None
            return Fabricated(kind, pid, format_entry(replace(rec, doi=other.doi), key), other.doi)
        if kind == "doi-malformed":
            if not paper.doi:
                return None
            how = DOI_CORRUPTIONS[self.rng.randrange(len(DOI_CORRUPTIONS))]
            bad = corrupt_doi(paper.doi, how)
            return Fabricated(kind, pid, _with_doi_field(format_entry(rec, key), bad), f"{how}: {bad}")
        raise ValueError(f"unknown fabrication {kind!r}")


def check_text(text: str, evidence: Evidence) -> EntryCheck | None:
    facts = read_entry(text)
    return None if facts is None else check_entry(facts, evidence)


def _codes(check: EntryCheck | None) -> set[str]:
    return {f.code for f in check.findings} if check is not None else set()


def score_fabricated(entries: Iterable[Fabricated], evidence: Evidence) -> list[dict]:
    """One row per fabricated entry: its kind, whether it was flagged, and what it was tied to."""
    rows = []
    for fab in entries:
        got = check_text(fab.text, evidence)
        codes = _codes(got)
        paper = got.paper if got is not None else None
        tied = paper is not None
        rows.append(
            {
                "kind": fab.kind,
                "source_id": fab.source_id,
                "parsed": got is not None,
                "suspect": SUSPECT in codes,
                "any": bool(codes & {SUSPECT, MISMATCH}),
                "tied": tied,
                "tied_to_source": paper is not None and paper.id == fab.source_id,
                "detail": fab.detail,
            }
        )
    return rows


def _frac(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


def summarise_fabricated(rows: Sequence[dict], tried: dict[str, int] | None = None) -> dict:
    """Per kind: entries, flagged suspect / by any finding, tied, and the same among the tied.
    ``tried``: papers each kind was attempted on (the rest could not be fabricated)."""
    groups = {kind: [r for r in rows if r["kind"] == kind] for kind in ALL_ROWS}
    groups["all"] = list(rows)
    groups["all but year±1"] = [r for r in rows if not r["kind"].startswith("year±1")]
    out: dict = {kind: _fab_row(rs) for kind, rs in groups.items()}
    if tried is not None:
        made = Counter(_base_kind(r["kind"]) for r in rows)
        out["not_made"] = {k: n - made[k] for k, n in tried.items()}
    return out


def _base_kind(row: str) -> str:
    """The :data:`FABRICATIONS` kind of a row name (``year±1 (no DOI)`` -> ``year (no DOI)``)."""
    suffix = NO_DOI if row.endswith(NO_DOI) else ""
    base = row.removesuffix(NO_DOI)
    return ("year" if base.startswith("year") else base) + suffix


def _fab_row(rs: Sequence[dict]) -> dict:
    tied = [r for r in rs if r["tied"]]
    return {
        "entries": len(rs),
        "suspect": _frac(sum(r["suspect"] for r in rs), len(rs)),
        "any": _frac(sum(r["any"] for r in rs), len(rs)),
        "tied": len(tied),
        "suspect_of_tied": _frac(sum(r["suspect"] for r in tied), len(tied)),
        "any_of_tied": _frac(sum(r["any"] for r in tied), len(tied)),
    }


def without_doi(paper: PaperRecord) -> PaperRecord:
    """The paper with neither its DOI nor a URL that only resolves it."""
    extra = {k: v for k, v in paper.extra.items() if not (k == "url" and "doi.org/" in v.lower())}
    return replace(paper, doi="", extra=extra)


def fabricate_all(
    papers: dict[int, PaperRecord], others: Callable[[], PaperRecord], seed: int = 0
) -> tuple[list[Fabricated], dict[str, int]]:
    """Every fabrication kind of every paper (in id order), and how many papers each kind tried."""
    fab = Fabricator(random.Random(seed), others)
    out: list[Fabricated] = []
    tried = Counter({k: len(papers) for k in FABRICATIONS})
    for pid in sorted(papers):
        paper = papers[pid]
        for kind in FABRICATIONS:
            made = fab.make(paper, pid, kind)
            if made:
                out.append(made)
        if not paper.doi:
            continue
        for kind in NO_DOI_KINDS:
            tried[kind + NO_DOI] += 1
            made = fab.make(without_doi(paper), pid, kind)
            if made:
                out.append(replace(made, kind=made.kind + NO_DOI))
    return out, dict(tried)


# -- unmodified entries -----------------------------------------------------------------------

_ENTRY_START = re.compile(r"(?m)^(?=@)")


def split_bib(text: str) -> list[str]:
    """The entries of a ``.bib`` text as written (one chunk per ``@`` at a line start)."""
    return [c.strip() + "\n" for c in _ENTRY_START.split(text) if c.strip().startswith("@")]


_DOI_FIELD = re.compile(r"(?im)^\s*doi\s*=\s*[{\"]?\s*([^}\",\s]+)")


def read_bib_entries(paths: Iterable[Path]) -> list[tuple[str, str, str]]:
    """``(source, DOI, entry text)`` of every entry of the ``.bib`` files, in file order."""
    out = []
    for path in sorted(paths):
        for chunk in split_bib(path.read_text(encoding="utf-8", errors="replace")):
            m = _DOI_FIELD.search(chunk)
            out.append((str(path), normalize_doi(m.group(1)) if m else "", chunk))
    return out


def _stored(p) -> dict:
    return {
        "id": p.id,
        "title": p.title,
        "authors": p.authors[:6],
        "year": p.year,
        "venue": p.venue,
        "doi": p.doi,
        "source": f"{p.source}:{p.source_line}",
    }


def finding_reason(f) -> str:
    """Why a finding was made, in a word or two, for counting false flags by cause."""
    if f.code == MISMATCH:
        fields = sorted(name for name, _v in (f.update.fields if f.update else ()))
        return "fields: " + ",".join(fields) + f" (tied by {f.details.get('tied_by', '?')})"
    if f.details.get("why") == "identifier-title":
        return "identifier of another title"
    if f.details.get("why") == "metadata":
        m = f.message
        parts = [
            w
            for w, said in (("authors", "its authors"), ("year", "its year"), ("title", "its title"))
            if said in m
        ]
        return "/".join(parts) + f" differ (tied by {f.details.get('tied_by', '?')})"
    if "malformed" in f.message:
        return "malformed DOI" if "DOI" in f.message else "malformed arXiv id"
    return f.code


def check_unmodified(entries: Iterable[tuple[str, str]], evidence: Evidence, examples: int = 3) -> dict:
    """Check real entries (``(group, text)``: group ``cited`` or ``sample``): counts of every
    finding code, entries flagged, counts by cause, and up to ``examples`` examples of each cause."""
    found: Counter[str] = Counter()
    groups: Counter[str] = Counter()
    flagged_entries: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    shown: dict[str, list[dict]] = {}
    unread = 0
    for group, text in entries:
        groups[group] += 1
        got = check_text(text, evidence)
        if got is None:
            unread += 1
            continue
        for code in _codes(got):
            flagged_entries[f"{group}:{code}"] += 1
        for f in got.findings:
            found[f.code] += 1
            if f.code not in (SUSPECT, MISMATCH):
                continue
            reason = f"{f.code}: {finding_reason(f)}"
            reasons[reason] += 1
            if len(shown.setdefault(reason, [])) < examples:
                stored = f.paper or got.paper
                shown[reason].append(
                    {
                        "group": group,
                        "message": f.message,
                        "entry": text[:600],
                        "stored": _stored(stored) if stored is not None else None,
                    }
                )
    return {
        "entries": dict(groups),
        "unreadable": unread,
        "findings": {c: found.get(c, 0) for c in (SUSPECT, MISMATCH, NOT_IN_STORE)},
        "flagged_entries": dict(sorted(flagged_entries.items())),
        "causes": dict(reasons.most_common()),
        "examples": shown,
    }


def sample_others(rng: random.Random, items: Sequence[T], n: int, skip: Callable[[T], bool]) -> list[T]:
    """``n`` items (fewer if there are not) drawn without replacement, none that ``skip`` rejects,
    in their original order."""
    idx = [i for i, x in enumerate(items) if not skip(x)]
    return [items[i] for i in sorted(rng.sample(idx, min(n, len(idx))))]


def title_differs(a: str, b: str) -> bool:
    return normalize_title(a) != normalize_title(b)


_SESSION = re.compile(r"(?im)^\s*title\s*=\s*[{\"]+\s*session details")


def is_session(entry_text: str) -> bool:
    """An ACM "Session details: ..." record (a proceedings heading, not a paper)."""
    return bool(_SESSION.search(entry_text))
