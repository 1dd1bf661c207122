"""What ``citewise fetch`` asks for, in which order, and where it resumes.

``--around LIBRARY``: (1) resolve the library's papers on Semantic Scholar, by id in batches of
500, else by title (only a title match that is the same title, with a year within one, and no
other library paper of that title); (2) page through each resolved paper's references and citing
papers, with their citing sentences and intents (``--limit`` of each list), and with ``--hops 2``
those of the papers found; (3) ask Crossref by DOI for the reference list of each library paper S2
gave none for; (4) ask arXiv by id for the library papers S2 did not find (preprints too new for
it); (5) ask OpenAlex by DOI for the abstracts S2 did not give.
A slice (``--query``, ``--field``, ``--venue``, with ``--years``): OpenAlex works passing its
filter, cursor page by cursor page, and (``--query``) Semantic Scholar's bulk search, token page
by token page, each up to ``--limit``.

Every page is committed with its task's new state (``state.write_page``), so any interruption
loses at most the page in flight, and the same command continues after the last committed one.
Memory is bounded by one page (and the list of tasks), whatever the number of papers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..citations import CitationEdge
from ..filters import title_key
from ..jsonl import RecordError
from ..records import ImportProblem, PaperRecord
from ..sources import arxiv as arxiv_source
from ..sources import crossref as crossref_source
from ..sources import openalex as openalex_source
from ..sources.crossref import resolve_text_references
from ..sources.s2ag import api_items
from ..store import Store
from . import state
from .arxiv import BATCH as ARXIV_BATCH
from .arxiv import ArXiv
from .crossref import Crossref
from .http import FetchError
from .library import Seed
from .openalex import DOI_BATCH, OpenAlex, doi_filter
from .s2 import BATCH, MAX_OFFSET, S2
from .state import (
    ARXIV_FORMAT,
    ARXIV_SOURCE,
    CROSSREF_FORMAT,
    CROSSREF_SOURCE,
    OPENALEX_FORMAT,
    OPENALEX_SOURCE,
    S2_FORMAT,
    S2_SOURCE,
    Task,
)

DIRECTIONS = ("references", "citations")
NOT_FOUND, AMBIGUOUS = "not found", "ambiguous"


class Stopped(Exception):
    """The caller asked the fetch to stop (the language server's cancel): raised between two
    committed pages or during a wait, never inside a page's transaction, so the store stays
    consistent and the same fetch continues after the last committed page."""


class Progress(Protocol):
    """What a phase's progress report needs (``citewise/progress.py``'s ``Phase`` is one)."""

    def update(self, n: int = 1) -> None: ...
    def set_detail(self, text: str) -> None: ...
    def close(self) -> None: ...


class _Silent:
    def update(self, n: int = 1) -> None:
        pass

    def set_detail(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def silent(label: str, unit: str, total: int | None) -> Progress:
    return _Silent()


@dataclass
class Totals:
    """What a run did, for the summary: pages committed, papers and edges added, seeds resolved,
    not found or ambiguous, lists that failed (a paper S2 lists but cannot page)."""

    pages: int = 0
    papers: int = 0
    updated: int = 0
    edges: int = 0
    resolved: int = 0
    not_found: int = 0
    ambiguous: int = 0
    listed: int = 0  # papers a slice's listing pages (OpenAlex works, S2 bulk search) held
    crossref: int = 0  # library papers whose reference list came from Crossref
    preprints: int = 0  # library papers S2 did not know, found on arXiv
    problems: list[str] = field(default_factory=list)

    def add(self, page: state.PageStats) -> None:
        self.pages += 1
        self.papers += page.papers.imported
        self.updated += page.papers.updated
        self.edges += page.edges


@dataclass
class Fetcher:
    """One fetch into ``store``; ``phase(label, unit, total)`` reports progress."""

    store: Store
    s2: S2
    openalex: OpenAlex | None = None
    limit: int = 500
    phase: Callable[[str, str, int | None], Progress] = silent
    totals: Totals = field(default_factory=Totals)
    stop: Callable[[], bool] | None = None  # asked after each committed page; True raises Stopped
    retry_missing: bool = False  # ask again for library papers an earlier run did not find
    crossref: Crossref | None = None  # reference lists S2 lacks, by DOI
    arxiv: ArXiv | None = None  # preprints too new for S2, by arXiv id

    def _write(self, source: str, fmt: str, items: Iterable[Any], tasks: list[Task]) -> None:
        page = state.write_page(self.store, source, fmt, _clean(items), tasks)
        self.totals.add(page)
        if self.stop is not None and self.stop():
            raise Stopped

    # -- 1. resolving the library ----------------------------------------------------------------
    def resolve(self, seeds: list[Seed]) -> list[str]:
        """The S2 refs of the seeds (resolving those not resolved by an earlier run)."""
        done = state.load(self.store, "resolve:")
        if self.retry_missing:  # papers S2 did not know then may be known now (new, or merged)
            done = {k: t for k, t in done.items() if t.result != NOT_FOUND}
        pending = [s for s in seeds if f"resolve:{s.key}" not in done]
        by_id = [s for s in pending if s.best]
        by_title = [s for s in pending if not s.best]
        bar = self.phase("resolving papers", " papers", len(pending))
        try:
            for i in range(0, len(by_id), BATCH):
                chunk = by_id[i : i + BATCH]
                self._resolve_batch(chunk)
                bar.update(len(chunk))
            self._resolve_titles(by_title, bar)
        finally:
            bar.close()
        done = state.load(self.store, "resolve:")
        refs = [done[f"resolve:{s.key}"].result for s in seeds if f"resolve:{s.key}" in done]
        self.totals.resolved = sum(1 for r in refs if r.startswith(("corpusid:", "s2:")))
        self.totals.not_found = sum(1 for r in refs if r == NOT_FOUND)
        self.totals.ambiguous = sum(1 for r in refs if r == AMBIGUOUS)
        return list(dict.fromkeys(r for r in refs if r.startswith(("corpusid:", "s2:"))))

    def _resolve_batch(self, chunk: list[Seed]) -> None:
        from .s2 import api_id

        papers = self.s2.batch([api_id(s.best) for s in chunk])
        tasks = [
            Task(f"resolve:{s.key}", done=True, result=_ref(p) or NOT_FOUND)
            for s, p in zip(chunk, papers, strict=True)
        ]
        found = [p for p in papers if p is not None]
        self._write(S2_SOURCE, S2_FORMAT, api_items(found, "", S2_SOURCE), tasks)

    def _resolve_titles(self, seeds: list[Seed], bar: Progress) -> None:
        """One ``search/match`` a title; a title two library papers share is not asked at all."""
        count: dict[str, int] = {}
        for s in seeds:
            count[title_key(s.title)] = count.get(title_key(s.title), 0) + 1
        for s in seeds:
            paper = None if count[title_key(s.title)] > 1 else self.s2.match(s.title)
            if paper is not None and not _same_paper(s, paper):
                paper = None
            result = _ref(paper) if paper else (AMBIGUOUS if count[title_key(s.title)] > 1 else NOT_FOUND)
            items = api_items([paper], "", S2_SOURCE) if paper else []
            self._write(S2_SOURCE, S2_FORMAT, items, [Task(f"resolve:{s.key}", done=True, result=result)])
            bar.update()

    # -- 2. references and citing papers ---------------------------------------------------------
    def expand(self, refs: list[str], directions: tuple[str, ...] = DIRECTIONS) -> None:
        """Every page of each paper's references and citing papers not fetched yet."""
        tasks = state.load(self.store, "s2:")
        todo = [(r, d) for r in refs for d in directions if not tasks.get(f"s2:{d}:{r}", Task("")).done]
        bar = self.phase("references and citing papers", " lists", len(todo))
        try:
            for i, (ref, direction) in enumerate(todo):
                self._ahead(todo[i : i + 1 + self.s2.client.ahead], tasks)
                self._page_through(
                    tasks.get(f"s2:{direction}:{ref}") or Task(f"s2:{direction}:{ref}"), ref, direction, bar
                )
                bar.update()
        finally:
            bar.close()

    def _ahead(self, todo: list[tuple[str, str]], tasks: dict[str, Task]) -> None:
        """Name the first pages of the lists to come: the client sends them at their slots while
        the pages before are stored (at 10 requests a second, storing a page takes about a slot)."""
        for ref, direction in todo:
            task = tasks.get(f"s2:{direction}:{ref}")
            self.s2.client.prefetch(
                *self.s2.edges_request(ref, direction, int(task.cursor or 0) if task else 0)
            )

    def _page_through(self, task: Task, ref: str, direction: str, bar: Progress) -> None:
        offset = int(task.cursor or 0)
        while not task.done:
            bar.set_detail(f"{ref} {direction} from {offset}")
            try:
                page = self.s2.edges(ref, direction, offset)
            except FetchError as exc:
                if exc.status not in (400, 404):
                    raise
                self.totals.problems.append(f"{ref} {direction}: {exc}")
                if exc.status == 400:
                    # A refused page (a bad offset, a paper S2 cannot page) is an error for this
                    # list, not its end: it stays where it is, and the next run asks it again.
                    return
                # 404: S2 does not know the paper; its list is finished (nothing to page).
                self._write(
                    S2_SOURCE, S2_FORMAT, [], [Task(task.name, str(offset), True, task.items, NOT_FOUND)]
                )
                return
            nxt = page.next
            items = task.items + page.count
            finished = nxt is None or nxt >= min(self.limit, MAX_OFFSET)
            task = Task(task.name, str(nxt or offset + page.count), finished, items)
            if nxt is not None and not finished:  # the next page goes at its slot while this one is stored
                self.s2.client.prefetch(*self.s2.edges_request(ref, direction, nxt))
            self._write(
                S2_SOURCE, S2_FORMAT, api_items(page.value, ref, S2_SOURCE, offset + 1, numbered=True), [task]
            )
            offset = nxt or offset

    def neighbours(self, refs: list[str]) -> list[str]:
        """The papers one hop from ``refs`` that the fetched edges name (``--hops 2``)."""
        wanted = set(refs)
        conn = self.store.conn
        found: dict[str, None] = {}
        for citing, cited in conn.execute(
            "SELECT citing_ref, cited_ref FROM citation_edges WHERE source=?", (S2_SOURCE,)
        ):
            if citing in wanted and cited not in wanted:
                found[cited] = None
            elif cited in wanted and citing not in wanted:
                found[citing] = None
        return list(found)

    # -- 3. reference lists from Crossref -------------------------------------------------------
    def crossref_references(self, seeds: list[Seed]) -> None:
        """Crossref's ``reference[]`` of each library paper with a DOI that S2 gave no reference
        list for: not found on S2, or found with an empty (finished) references list, as S2 gives
        for papers whose publisher withholds them. One request a paper, remembered."""
        if self.crossref is None:
            return
        todo = self._without_references(seeds)
        bar = self.phase("references from Crossref", " papers", len(todo))
        try:
            for doi in todo:
                work = self.crossref.work(doi)
                items = [_crossref_record(work)] if work is not None else []
                result = NOT_FOUND if work is None else str(len(work.get("reference") or []))
                self._write(
                    CROSSREF_SOURCE,
                    CROSSREF_FORMAT,
                    items,
                    [Task(f"crossref:{doi}", done=True, result=result)],
                )
                self.totals.crossref += work is not None
                bar.update()
        finally:
            bar.close()
        if todo:  # references by their text: matched to the stored papers' titles, as an import does
            with self.store._transaction() as conn:
                resolve_text_references(conn)

    def _without_references(self, seeds: list[Seed]) -> list[str]:
        """The DOIs of the seeds S2 has no reference list for, not asked of Crossref before."""
        resolved = state.load(self.store, "resolve:")
        lists = state.load(self.store, "s2:references:")
        asked = state.load(self.store, "crossref:")
        todo: dict[str, None] = {}
        for seed in seeds:
            doi = next((r for r in seed.refs if r.startswith("10.")), "")
            if not doi or f"crossref:{doi}" in asked:
                continue
            ref = resolved[f"resolve:{seed.key}"].result if f"resolve:{seed.key}" in resolved else ""
            listed = lists.get(f"s2:references:{ref}")
            if ref.startswith(("corpusid:", "s2:")) and (listed is None or not listed.done or listed.items):
                continue  # S2 gave its references (or has not finished giving them)
            todo[doi] = None
        return list(todo)

    # -- 4. preprints from arXiv -------------------------------------------------------------------
    def arxiv_preprints(self, seeds: list[Seed]) -> None:
        """The library papers with an arXiv id that S2 did not find, from arXiv (100 ids a
        request): most are preprints too new for S2. Each id is asked once; a batch arXiv refuses
        (an id it cannot read) is a note, its ids not asked again."""
        if self.arxiv is None:
            return
        resolved, asked = state.load(self.store, "resolve:"), state.load(self.store, "arxiv:")
        ids = sorted(
            {
                r.split(":", 1)[1]
                for s in seeds
                if resolved.get(f"resolve:{s.key}", Task("")).result == NOT_FOUND
                for r in s.refs
                if r.startswith("arxiv:") and f"arxiv:{r.split(':', 1)[1]}" not in asked
            }
        )
        bar = self.phase("preprints from arXiv", " papers", len(ids))
        try:
            for i in range(0, len(ids), ARXIV_BATCH):
                chunk = ids[i : i + ARXIV_BATCH]
                try:
                    found = self.arxiv.lookup(chunk)
                except FetchError as exc:
                    if exc.status != 400:
                        raise
                    self.totals.problems.append(str(exc))
                    found = {}
                items = [_arxiv_record(found[a], n) for n, a in enumerate(chunk, 1) if a in found]
                tasks = [
                    Task(f"arxiv:{a}", done=True, result="found" if a in found else NOT_FOUND) for a in chunk
                ]
                self._write(ARXIV_SOURCE, ARXIV_FORMAT, items, tasks)
                self.totals.preprints += len(items)
                bar.update(len(chunk))
        finally:
            bar.close()

    # -- 5. abstracts from OpenAlex ----------------------------------------------------------------
    def abstracts(self) -> None:
        """OpenAlex works of the fetched papers that have a DOI and no abstract (50 a request)."""
        if self.openalex is None:
            return
        asked = state.load(self.store, "openalex:doi:")
        dois = [
            doi
            for (doi,) in self.store.conn.execute(
                "SELECT p.doi FROM papers p JOIN paper_sources s ON s.paper_id = p.id "
                "WHERE s.source=? AND p.doi != '' AND p.abstract = ''",
                (S2_SOURCE,),
            )
            if f"openalex:doi:{doi}" not in asked
        ]
        bar = self.phase("abstracts from OpenAlex", " papers", len(dois))
        try:
            for i in range(0, len(dois), DOI_BATCH):
                chunk = dois[i : i + DOI_BATCH]
                page = self.openalex.works(doi_filter(chunk))
                tasks = [Task(f"openalex:doi:{d}", done=True) for d in chunk]
                self._write(OPENALEX_SOURCE, OPENALEX_FORMAT, _works(page.results), tasks)
                bar.update(len(chunk))
        finally:
            bar.close()

    # -- a slice: OpenAlex filters, Semantic Scholar's bulk search -------------------------------
    def query(self, filt: str) -> None:
        """OpenAlex works passing ``filt``, cursor page by page, up to ``limit`` works."""
        assert self.openalex is not None
        oa = self.openalex

        def ask(cursor: str) -> tuple[list[Any], str | None]:
            page = oa.works(filt, cursor or "*")
            return page.results, page.next

        listing = _Listing(
            f"openalex:{filt}", "*", f"OpenAlex {filt}", "cursor", OPENALEX_SOURCE, OPENALEX_FORMAT
        )
        self._page_listing(listing, ask, _works, ("OpenAlex works", " works"))

    def bulk(self, query: str, years: str | None = None) -> None:
        """Semantic Scholar's bulk search for ``query`` (its token paging), up to ``limit`` papers."""

        def ask(token: str) -> tuple[list[Any], str | None]:
            page = self.s2.bulk(query, years, token or None)
            return page.data, page.next

        def convert(data: list[Any]) -> Iterable[Any]:
            return api_items(data, "", S2_SOURCE)

        listing = _Listing(
            f"s2bulk:{query}|{years or ''}", "", f"Semantic Scholar {query!r}", "token", S2_SOURCE, S2_FORMAT
        )
        self._page_listing(listing, ask, convert, ("Semantic Scholar search", " papers"))

    def _page_listing(
        self,
        ls: _Listing,
        ask: Callable[[str], tuple[list[Any], str | None]],
        convert: Callable[[list[Any]], Iterable[Any]],
        label: tuple[str, str],
    ) -> None:
        """A listing page by page, each page stored with the cursor (or token) after it, up to
        ``limit`` items. A page cut by the limit keeps its own cursor and how much of it is
        stored (``result`` ``skip:N``), so a later run with a larger ``--limit`` goes on exactly
        there; a cursor the API no longer takes (400; OpenAlex keeps one a few minutes) starts
        the listing again from the beginning, once: what is stored merges with itself."""
        task = state.load(self.store, ls.name).get(ls.name) or Task(ls.name, ls.first)
        more = task.result.startswith("skip:") or task.cursor not in ("", ls.first)
        if task.done and more and task.items < self.limit:
            task = Task(task.name, task.cursor, False, task.items, task.result)  # a larger --limit
        bar = self.phase(*label, self.limit)
        bar.update(task.items)
        restarted = False
        try:
            while not task.done:
                skip = int(task.result[5:]) if task.result.startswith("skip:") else 0
                try:
                    results, nxt = ask(task.cursor)
                except FetchError as exc:
                    if exc.status != 400 or task.cursor in ("", ls.first) or restarted:
                        raise
                    restarted, task = True, Task(ls.name, ls.first)
                    self.totals.problems.append(f"{ls.what}: the {ls.kind} expired ({exc}); listed again")
                    continue
                kept = results[skip:][: self.limit - task.items]
                if not self._listed(task, len(kept), nxt):
                    return
                items = task.items + len(kept)
                if skip + len(kept) < len(results):  # cut by the limit: this page again, later
                    task = Task(ls.name, task.cursor, True, items, f"skip:{skip + len(kept)}")
                else:
                    task = Task(ls.name, nxt or "", nxt is None or items >= self.limit, items)
                self._write(ls.source, ls.fmt, convert(kept), [task])
                bar.update(len(kept))
        finally:
            bar.close()

    def _listed(self, task: Task, count: int, nxt: str | None) -> bool:
        """Count a listing page; False for an empty first and last page (nothing matches): no
        state is written for it, so an empty slice leaves the store as it was."""
        self.totals.listed += count
        return bool(count or task.items or nxt)


@dataclass
class _Listing:
    """A paged listing: its task name, first cursor, how problems name it, what its cursor is
    called (``cursor``, ``token``) and the source and format its pages are stored under."""

    name: str
    first: str
    what: str
    kind: str
    source: str
    fmt: str


def _ref(paper: dict[str, Any] | None) -> str:
    """The ref a Graph API paper is stored under (its corpus id, else its paper id)."""
    if not paper:
        return ""
    corpus = paper.get("corpusId") or (paper.get("externalIds") or {}).get("CorpusId")
    if corpus is not None and str(corpus).isdigit():
        return f"corpusid:{int(corpus)}"
    sha = paper.get("paperId")
    return f"s2:{sha.lower()}" if isinstance(sha, str) and sha else ""


def _same_paper(seed: Seed, paper: dict[str, Any]) -> bool:
    """A title match is taken only for the same title and, when both have one, a year within one."""
    title = paper.get("title")
    if not isinstance(title, str) or title_key(title) != title_key(seed.title):
        return False
    year = paper.get("year")
    return seed.year is None or not isinstance(year, int) or abs(year - seed.year) <= 1


def _arxiv_record(line: dict[str, Any], n: int) -> PaperRecord | ImportProblem:
    try:
        return arxiv_source.record_from_line(line, ARXIV_SOURCE, n)
    except RecordError as exc:
        return ImportProblem(ARXIV_SOURCE, n, str(exc))


def _crossref_record(work: dict[str, Any]) -> PaperRecord | ImportProblem:
    try:
        return crossref_source.record_from_work(work, CROSSREF_SOURCE, 1)
    except RecordError as exc:
        return ImportProblem(CROSSREF_SOURCE, 1, str(exc))


def _works(results: list[Any]) -> Iterator[PaperRecord | ImportProblem]:
    for i, work in enumerate(results):
        try:
            yield openalex_source.record_from_work(work, OPENALEX_SOURCE, i + 1)
        except RecordError as exc:
            yield ImportProblem(OPENALEX_SOURCE, i + 1, f"results[{i}]: {exc}")


def _clean(items: Iterable[Any]) -> Iterator[PaperRecord | CitationEdge | ImportProblem]:
    """Papers, edges and problems (an unanchored item cannot occur: every page names its paper)."""
    return (i for i in items if isinstance(i, (PaperRecord, CitationEdge, ImportProblem)))
