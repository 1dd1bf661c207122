"""The per-placeholder protocol (issue 16): each citation marker of a sentence is its own query.

The sentence-level protocol of ``shared/data/README.md`` asks one query per citing sentence and
counts every reference of the sentence as relevant, so it cannot see whether "rule-based [2, 11]
and end-to-end [18, 31] systems" gets one list for rule-based systems and another for end-to-end
ones. Here every marker is a query: the sentence with the placeholder at that marker and the other
markers removed (their places kept as ``others``, as the editor's draft reader does), relevant =
that marker's references only.

ACM-CR: a marker ``[2, 11]`` / ``[3-5]`` names reference ids; its relevant DOIs are those of its
ids that the sentence's ``cites`` attribute lists (4 dev sentences have a marker id that the
attribute lacks, e.g. ``[7]`` with ``cites="5,10"``: such a marker stays a marker but is no query).
ACL citances: one query per (sentence, cited paper) whose author-year marker can be found (first
author's last name and year, else the year alone, else the sentence's only marker).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from citewise.evaluation import protocol as evaluation
from citewise.evaluation.protocol import _AUTHOR_YEAR, EvalQuery, aggregate, query_metrics, read_citing_paper
from citewise.models.focus import OTHER_MARK, PLACEHOLDER_MARK, marked_query

_NUMERIC_MARKER = re.compile(r"\[\s*\d+(?:\s*[-\u2013,;]\s*\d+)*\s*\]")
_RANGE = re.compile(r"(\d+)\s*[-\u2013]\s*(\d+)")


def marker_ids(marker: str) -> list[str]:
    """Reference ids named by a numeric marker: ``[2, 11]`` -> 2, 11; ``[3-5]`` -> 3, 4, 5."""
    out: list[str] = []
    for part in re.split(r"[,;]", marker.strip("[] ")):
        m = _RANGE.fullmatch(part.strip())
        if m and 0 <= int(m.group(2)) - int(m.group(1)) <= 50:
            out.extend(str(i) for i in range(int(m.group(1)), int(m.group(2)) + 1))
        elif part.strip():
            out.append(part.strip())
    return out


def mark_sentence(sentence: str, spans: Sequence[tuple[int, int]], target: int) -> str:
    """The sentence with marker ``target`` of ``spans`` replaced by the placeholder mark and every
    other one by the other-marker mark (the text :func:`~citewise.models.focus.marked_query` reads)."""
    parts, pos = [], 0
    for i, (s, e) in enumerate(spans):
        parts.append(sentence[pos:s])
        parts.append(f" {PLACEHOLDER_MARK if i == target else OTHER_MARK} ")
        pos = e
    parts.append(sentence[pos:])
    return "".join(parts)


def sentence_placeholder_queries(
    qid: str, citing: str, sentence: str, cites: set[str], refs: dict[str, str], title: str, abstract: str
) -> list[EvalQuery]:
    """The queries of one ACM-CR sentence, one per numeric marker with a relevant DOI."""
    stripped = _AUTHOR_YEAR.sub("", sentence)
    markers = list(_NUMERIC_MARKER.finditer(stripped))
    spans = [m.span() for m in markers]
    out: list[EvalQuery] = []
    for i, m in enumerate(markers):
        dois = {refs.get(x, "") for x in marker_ids(m.group()) if x in cites}
        dois.discard("")
        if not dois:
            continue
        query = marked_query(mark_sentence(stripped, spans, i), title, abstract)
        out.append(EvalQuery(f"{qid}@{i + 1}", citing, query, dois, sentence))
    return out


def load_citing_paper(path: Path, collection_dois: set[str] | None) -> list[EvalQuery]:
    """Per-placeholder queries of one citing-paper XML (numbering as the sentence protocol's qids)."""
    paper = read_citing_paper(path)
    refs = paper.refs
    if collection_dois is not None:
        refs = {k: v for k, v in refs.items() if v in collection_dois}
    out: list[EvalQuery] = []
    for qid, sentence, ids in paper.sentences:
        out.extend(
            sentence_placeholder_queries(
                qid, paper.doi, sentence, set(ids), refs, paper.title, paper.abstract
            )
        )
    return out


def load_dev_queries(papers_dir: str | Path, collection_dois: set[str] | None) -> list[EvalQuery]:
    """Per-placeholder queries of every citing-paper XML under ``papers_dir``."""
    return evaluation.load_dev_queries(papers_dir, collection_dois, load_citing_paper)


def sentence_of(qid: str) -> str:
    """The sentence-level qid a per-placeholder qid belongs to (``...#01.3@2`` -> ``...#01.3``)."""
    return qid.rsplit("@", 1)[0]


@dataclass
class SharedLists:
    """Sentences with 2+ placeholder queries of different references, and how many of them gave
    every placeholder the same top 10 (as a set: order aside, the list the user sees)."""

    sentences: int
    identical: int

    @property
    def fraction(self) -> float:
        return round(self.identical / self.sentences, 4) if self.sentences else 0.0


def multi_group_sentences(queries: Sequence[EvalQuery]) -> list[list[EvalQuery]]:
    """The per-placeholder queries of each sentence whose placeholders cite different papers (the
    sentences where one list for all placeholders is wrong), grouped by sentence."""
    by_sentence: dict[str, list[EvalQuery]] = defaultdict(list)
    for q in queries:
        by_sentence[sentence_of(q.qid)].append(q)
    return [qs for qs in by_sentence.values() if len({frozenset(q.relevant) for q in qs}) >= 2]


def shared_top10(queries: Sequence[EvalQuery], top10: Mapping[str, Sequence[str]]) -> SharedLists:
    """Count the multi-placeholder sentences whose placeholders share one top-10 list."""
    n = same = 0
    for qs in multi_group_sentences(queries):
        n += 1
        if len({frozenset(top10[q.qid][:10]) for q in qs}) == 1:
            same += 1
    return SharedLists(n, same)


@dataclass
class NeighbourLists:
    """Placeholders of sentences with 2+ marker groups, and how many share their top 10 (as a set)
    with the placeholder before or after them although the two cite different papers: the list
    the user sees does not move from one placeholder to the next."""

    placeholders: int
    shared: int

    @property
    def fraction(self) -> float:
        return round(self.shared / self.placeholders, 4) if self.placeholders else 0.0


def _marker_index(qid: str) -> int:
    """The marker position of a per-placeholder qid (``...@3`` -> 3)."""
    return int(qid.rsplit("@", 1)[1])


def shared_with_neighbour(queries: Sequence[EvalQuery], top10: Mapping[str, Sequence[str]]) -> NeighbourLists:
    """Count the placeholders whose top 10 equals a neighbouring placeholder's (the next query of
    the same sentence, before or after) with different references."""
    n = shared = 0
    for qs in multi_group_sentences(queries):
        qs = sorted(qs, key=lambda q: _marker_index(q.qid))
        tops = [frozenset(top10[q.qid][:10]) for q in qs]
        for i, q in enumerate(qs):
            n += 1
            shared += any(
                0 <= j < len(qs) and tops[j] == tops[i] and qs[j].relevant != q.relevant
                for j in (i - 1, i + 1)
            )
    return NeighbourLists(n, shared)


def multi_marker_sentences(queries: Sequence[EvalQuery]) -> set[str]:
    """Sentence qids with 2+ placeholder queries of different references."""
    rel: dict[str, set[frozenset[str]]] = defaultdict(set)
    for q in queries:
        rel[sentence_of(q.qid)].add(frozenset(q.relevant))
    return {s for s, groups in rel.items() if len(groups) >= 2}


# -- ACL citances ------------------------------------------------------------------------------
def acl_placeholder_queries(citances_path: str | Path, store) -> tuple[list[EvalQuery], dict[str, int]]:
    """The ACL dev split per placeholder: one query per (sentence, cited paper of the store) whose
    marker is found; the qids share the sentence-level numbering of ``load_acl_dev_queries``."""
    from .citances import acl_year, find_markers, load_citances

    rows = store.conn.execute("SELECT id, acl_id FROM papers WHERE acl_id != ''").fetchall()
    pid_of = {acl: pid for pid, acl in rows}
    queries: list[EvalQuery] = []
    citing_pid: dict[str, int] = {}
    for n, c in enumerate(load_citances(citances_path, dev=True), start=1):
        paper = store.get(pid_of[c.citing]) if c.citing in pid_of else None
        if paper is not None:
            citing_pid[c.citing] = paper.id
        title, abstract = (paper.title, paper.abstract) if paper else ("", "")
        markers = find_markers(c.text)
        spans = [(mk.start, mk.end) for mk in markers]
        for cited in c.cited:
            if cited not in pid_of:
                continue
            cited_paper = store.get(pid_of[cited])
            last = cited_paper.authors[0].split(",")[0].strip() if cited_paper and cited_paper.authors else ""
            target = _acl_target([mk.text for mk in markers], last, acl_year(cited))
            if target is None:
                continue
            query = marked_query(mark_sentence(c.text, spans, target), title, abstract)
            if query.local:
                queries.append(EvalQuery(f"{c.citing}#{n}@{target + 1}", c.citing, query, {cited}, c.text))
    return queries, citing_pid


def _acl_target(markers: list[str], last: str, year: int | None) -> int | None:
    """Which marker cites the paper: first author's last name and year, else the year alone,
    else the sentence's only marker; None when it cannot be told."""
    y = str(year) if year else "\x00"
    last = last.lower()
    for test in (lambda t: bool(last) and last in t.lower() and y in t, lambda t: y in t):
        hits = [i for i, t in enumerate(markers) if test(t)]
        if len(hits) == 1:
            return hits[0]
    return 0 if len(markers) == 1 else None


# -- reporting both protocols side by side -----------------------------------------------------
@dataclass
class ProtocolRun:
    """One protocol's queries with each query's metrics and ranked list (its top 10 kept)."""

    queries: list[EvalQuery]
    per_query: dict[str, dict[str, float]]
    top10: dict[str, list[str]]


def run_protocol(
    rank: Callable[[EvalQuery], Sequence[str]], queries: list[EvalQuery], tick=None
) -> ProtocolRun:
    """Rank every query once; keep what the report needs (metrics, top 10)."""
    run = ProtocolRun(queries, {}, {})
    for q in queries:
        ranked = list(rank(q))
        run.per_query[q.qid] = query_metrics(ranked, q.relevant)
        run.top10[q.qid] = ranked[:10]
        if tick is not None:
            tick()
    return run


def report_rows(name: str, runs: dict[str, ProtocolRun]) -> tuple[dict[str, dict[str, float]], dict]:
    """The table rows (each protocol on all its queries; when the per-placeholder protocol ran,
    also both protocols on the sentences with 2+ marker groups) and the shared-list count."""
    rows = {f"{name}, {p}": aggregate(list(r.per_query.values())) for p, r in runs.items()}
    extra: dict = {}
    ph = runs.get("placeholder")
    if ph is None:
        return rows, extra
    multi = multi_marker_sentences(ph.queries)
    sent = runs.get("sentence")
    if sent is not None:
        picked = [m for qid, m in sent.per_query.items() if qid in multi]
        rows[f"{name}, sentence, 2+ marker groups"] = aggregate(picked)
    picked = [m for qid, m in ph.per_query.items() if sentence_of(qid) in multi]
    rows[f"{name}, placeholder, 2+ marker groups"] = aggregate(picked)
    shared = shared_top10(ph.queries, ph.top10)
    neighbours = shared_with_neighbour(ph.queries, ph.top10)
    extra["placeholder_lists"] = {
        "sentences": shared.sentences,
        "identical_top10": shared.identical,
        "fraction": shared.fraction,
        "placeholders": neighbours.placeholders,
        "same_top10_as_neighbour": neighbours.shared,
        "neighbour_fraction": neighbours.fraction,
    }
    return rows, extra
