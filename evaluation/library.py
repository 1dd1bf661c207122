"""The user's own library protocol (issue 26, item 4): rank each sentence against a small library.

Most of what a draft cites is already in its author's ``.bib``, among a few hundred other papers of
the field, and there the top of the list is what counts. For each dev citing paper this protocol
builds that library as a real store of its own, the way a user's ``citewise index`` would:

- the papers the citing paper cites that the collection holds (all its references, not only those
  of the sentences that are queries: a ``.bib`` holds the whole reference list), plus
- ``size`` (default 300) papers "of the same field", drawn with a seed derived from ``seed`` and the
  citing paper's id (so a paper's library does not depend on which other papers run):
  - **ACM-CR**: papers of the same venue series as the cited papers. A series is the collection's
    BibTeX file name without its year (``sigir/sigir-2019.bib`` -> ``sigir``, ``journals/tois.bib``
    -> ``tois``), so every year of a conference is one series and each journal its own. Each draw
    picks a series with probability proportional to how many of the cited papers it holds, then a
    paper of it uniformly (a paper citing 14 SIGIR and 2 CHI papers gets a library mostly of SIGIR,
    not one swamped by CHI's 19,000 papers). Only papers of the collection (``inproceedings`` /
    ``article``, not blacklisted: no citing paper of ACM-CR, dev or test, is ever inside), none
    published after the citing paper.
  - **ACL**: the Anthology is the field: one series, the store's papers with an Anthology id, minus
    every citing paper of the dev split, none published after the citing paper. The cited papers are
    those ScisummNet labels in the dev sentences (its sentences label one reference paper each, so
    these libraries hold far fewer cited papers than the ACM-CR ones).
- The papers are copied as records (title, abstract, authors, venue, keywords, BibTeX ...) into a
  temporary SQLite store and its BM25 index is built as ``citewise index`` builds it, so idf and
  lengths are the library's own; citation data of the big store is not copied (a ``.bib`` has none).
  Papers are embedded only where the ranking would read embeddings (``dense_index.ranking_uses_
  embeddings``, as ``citewise index`` decides).

Queries are the sentence protocol's; each is ranked by the caller's pipeline over its paper's store,
and scored with R@1, R@5, R@10, MRR and nDCG@10 (``protocol.LIBRARY_KEYS``).
"""

from __future__ import annotations

import copy
import hashlib
import random
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from citewise.evaluation.protocol import (
    LIBRARY_CUTOFFS,
    LIBRARY_KEYS,
    Collection,
    EvalQuery,
    aggregate,
    query_metrics,
    read_citing_paper,
)
from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store

DEFAULT_SIZE = 300
ANTHOLOGY = "anthology"  # the one series of the ACL field
_YEAR_SUFFIX = re.compile(r"-(?:19|20)\d{2}$")
_DIGITS = re.compile(r"[\d\s]+")


def venue_series(source: str, venue: str = "") -> str:
    """A paper's venue series: its BibTeX file's name without the year (``sigir-2019.bib`` ->
    ``sigir``, ``tois.bib`` -> ``tois``); for other sources the venue with digits removed."""
    path = Path(source)
    if path.suffix.lower() == ".bib":
        return _YEAR_SUFFIX.sub("", path.stem).lower()
    return _DIGITS.sub(" ", venue).strip().lower()


@dataclass
class Field:
    """Where same-field papers are drawn from: each series' papers (sorted ids), and years."""

    by_series: dict[str, list[int]]
    series: dict[int, str]
    year: dict[int, int | None]


@dataclass
class LibraryCase:
    """One citing paper: its library (ids in the big store) and its sentence queries."""

    citing: str  # DOI (ACM-CR) or Anthology id (ACL)
    cited: list[int]
    others: list[int]
    queries: list[EvalQuery]

    @property
    def ids(self) -> list[int]:
        return self.cited + self.others


def paper_rng(seed: int, citing: str) -> random.Random:
    """The draw of one citing paper: the same whatever other papers run, or in which order."""
    digest = hashlib.sha256(f"{seed}:{citing}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def sample_same_field(
    cited: Sequence[int], field: Field, size: int, rng: random.Random, max_year: int | None = None
) -> list[int]:
    """``size`` papers of the cited papers' series (fewer when those series hold fewer), drawn
    series by cited-count weight, then uniformly within the series; none of ``cited``, none after
    ``max_year``. Sorted by id."""
    taken = set(cited)
    weights = Counter(field.series[pid] for pid in cited if pid in field.series)
    pools: dict[str, list[int]] = {}
    for series in sorted(weights):
        pool = [
            pid
            for pid in field.by_series.get(series, ())
            if pid not in taken and (max_year is None or (field.year.get(pid) or 0) <= max_year)
        ]
        rng.shuffle(pool)
        pools[series] = pool
    out: list[int] = []
    while len(out) < size:
        live = [s for s in pools if pools[s]]
        if not live:
            break
        series = rng.choices(live, weights=[weights[s] for s in live])[0]
        out.append(pools[series].pop())
    return sorted(out)


def _group(queries: list[EvalQuery]) -> dict[str, list[EvalQuery]]:
    out: dict[str, list[EvalQuery]] = {}
    for q in queries:
        out.setdefault(q.citing_doi, []).append(q)
    return out


def acmcr_field(store: Store, coll: Collection) -> Field:
    """The ACM-CR collection's papers by venue series (the excluded ones left out)."""
    by_series: dict[str, list[int]] = {}
    series: dict[int, str] = {}
    year: dict[int, int | None] = {}
    for pid, source, venue, y in store.conn.execute("SELECT id, source, venue, year FROM papers ORDER BY id"):
        if pid in coll.excluded:
            continue
        s = venue_series(source or "", venue or "")
        series[pid], year[pid] = s, y
        by_series.setdefault(s, []).append(pid)
    return Field(by_series, series, year)


def acmcr_libraries(
    papers_dir: str | Path,
    store: Store,
    coll: Collection,
    queries: list[EvalQuery],
    size: int = DEFAULT_SIZE,
    seed: int = 0,
) -> list[LibraryCase]:
    """One library per citing paper of ``queries`` (in their order), as the module says."""
    field = acmcr_field(store, coll)
    pid_of = {doi: pid for pid, doi in coll.doi_of.items() if doi and pid not in coll.excluded}
    year_of = {doi: y for doi, y in store.conn.execute("SELECT doi, year FROM papers WHERE doi != ''")}
    grouped = _group(queries)
    cases = []
    for path in sorted(Path(papers_dir).rglob("*.xml")):
        paper = read_citing_paper(path)
        if paper.doi not in grouped:
            continue
        cited = sorted({pid_of[d] for d in paper.refs.values() if d in pid_of})
        others = sample_same_field(cited, field, size, paper_rng(seed, paper.doi), year_of.get(paper.doi))
        cases.append(LibraryCase(paper.doi, cited, others, grouped[paper.doi]))
    order = list(grouped)
    return sorted(cases, key=lambda c: order.index(c.citing))


def acl_libraries(
    store: Store,
    queries: list[EvalQuery],
    citing_pid: dict[str, int],
    size: int = DEFAULT_SIZE,
    seed: int = 0,
) -> list[LibraryCase]:
    """ACL dev: the Anthology as the field (one series), the labelled cited papers as the library's
    cited part; every dev citing paper is kept out of every library."""
    from citewise.evaluation.citances import acl_year

    rows = store.conn.execute("SELECT id, acl_id, year FROM papers WHERE acl_id != '' ORDER BY id").fetchall()
    citing_ids = set(citing_pid.values())
    pid_of = {acl: pid for pid, acl, _ in rows}
    kept = [(pid, y) for pid, _, y in rows if pid not in citing_ids]
    field = Field(
        {ANTHOLOGY: [pid for pid, _ in kept]}, dict.fromkeys(pid_of.values(), ANTHOLOGY), dict(kept)
    )
    cases = []
    for citing, group in _group(queries).items():
        cited = sorted({pid_of[a] for q in group for a in q.relevant if a in pid_of})
        others = sample_same_field(cited, field, size, paper_rng(seed, citing), acl_year(citing))
        cases.append(LibraryCase(citing, cited, others, group))
    return cases


def copy_record(paper: PaperRecord) -> PaperRecord:
    """The paper as an importer would yield it (every record field; the store's own id left behind)."""
    return PaperRecord(**{f.name: copy.deepcopy(getattr(paper, f.name)) for f in fields(PaperRecord)})


def build_library_store(source: Store, ids: Sequence[int], path: Path, prefetch: str = "auto") -> Store:
    """A new store at ``path`` holding copies of ``source``'s papers ``ids``, with the BM25 index
    ``citewise index`` builds (and the embeddings where the ranking under ``prefetch`` reads them)."""
    from citewise.indexer import bm25_files

    store = Store(path)
    papers = source.get_many(list(ids))
    records = [copy_record(papers[pid]) for pid in ids if pid in papers]
    store.import_source(str(path.with_suffix(".bib")), records, fmt="bibtex")
    bm25_files.load_or_build(store, allow_delta=False)
    try:
        from citewise.models import dense_index
    except ImportError:  # no dense extra: BM25 only, as for a user without it
        return store
    if dense_index.ranking_uses_embeddings(store, prefetch):
        try:
            dense_index.build_index(store)
        except dense_index.ModelError:  # as `citewise index`: no model, BM25 only (the CLI says so)
            pass
    return store


def store_ids(store: Store, id_field: str) -> dict[int, str]:
    """Library store id -> the protocol's paper id (``doi`` or ``acl_id``)."""
    if id_field not in ("doi", "acl_id"):
        raise ValueError(id_field)
    return dict(store.conn.execute(f"SELECT id, {id_field} FROM papers").fetchall())


@dataclass
class LibraryRun:
    """Per-query metrics of every case, and the libraries' sizes."""

    per_query: dict[str, dict[str, float]]
    sizes: list[int]
    cited: list[int]

    def metrics(self) -> dict[str, float]:
        return aggregate(list(self.per_query.values()), LIBRARY_KEYS)


def run_libraries(
    cases: Sequence[LibraryCase],
    source: Store,
    make_rank: Callable[[Store], Callable[[EvalQuery], Sequence[str]]],
    prefetch: str = "auto",
    tick: Callable[[], None] | None = None,
) -> LibraryRun:
    """Build each case's store in a temporary folder, rank its queries with ``make_rank(store)``
    (query -> ranked paper ids, best first), and score them at the library cutoffs."""
    run = LibraryRun({}, [], [])
    for case in cases:
        with tempfile.TemporaryDirectory(prefix="citewise-library-") as tmp:
            store = build_library_store(source, case.ids, Path(tmp) / "library.sqlite", prefetch)
            try:
                rank = make_rank(store)
                run.sizes.append(store.count())
                run.cited.append(len(case.cited))
                for q in case.queries:
                    run.per_query[q.qid] = query_metrics(list(rank(q)), q.relevant, LIBRARY_CUTOFFS)
                    if tick is not None:
                        tick()
            finally:
                store.close()
    return run
