"""What the store knows, per source: papers, abstracts, citation edges, citing sentences, and the
share of edges that reach a stored paper (``citewise info``, the editor's status tooltip).

Why per source: citation knowledge is the strongest signal the ranking has (issue 25: R@10 0.176
with papers only, 0.342 with the ACL edges and citing sentences), and it arrives from many places
(a citation TSV, S2AG ``citations``, OpenAlex ``referenced_works``, unarXive's citation spans). A
user who imported an OpenAlex field and an S2AG citations file needs to see which of them gave
edges, how many of those edges land on papers the store holds (an edge to a paper it lacks feeds
neither the expansion nor the count prior), and where the citing sentences came from.

How it is counted (SQL aggregates only, one pass over each table, so it stays fast on a store of
a million papers; nothing is resolved in Python):

- *papers*: the papers a source holds (``paper_sources``); *abstracts*: those of them with an
  abstract, plus the abstracts a source keeps apart from its papers (S2AG ``abstracts``).
- *edges*: the reference lists of the source's papers (``citations``: OpenAlex, Crossref, JSON
  Lines, unarXive...), plus the distinct citing -> cited pairs of its ``citation_edges`` rows
  (citation files, S2AG ``citations``, Graph API pages) whose citing paper is not one of its own
  (those repeat its reference lists: a JSON Lines or unarXive paper's citing sentences).
  *resolved*: the edges whose cited paper is stored, by the ids the ranking resolves them by
  (``citations.cited``; for edge rows the columns and ``paper_ids`` of ``citations.ref_map``).
- *sentences*: the ``citation_edges`` rows with a citing sentence.

By kind (the default view: ACM-CR is 903 ``.bib`` files) a paper, a reference and a pair count
once however many files of the kind hold them; citing sentences are rows, counted per file.
:func:`summarize_total` counts the same way over the whole store, or over the files of one import.

The words: :func:`citation_words` and :func:`holdings_words` are what both ``citewise index``'s
summary and ``citewise info`` print, so the two never disagree in number or in name. Why that
matters: the raw tables count differently (an S2AG citations file stores one row per citing
sentence: 94 rows are 77 citing -> cited edges, 44 of them sentences), and an import that said
"94 citation edges" beside an ``info`` saying 77 looked like lost data.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from dataclasses import asdict, dataclass, replace
from typing import Literal

from .store import Store

Grouping = Literal["kind", "file", "all"]

# Formats whose records never carry a reference list: their papers' edges (in ``citations``)
# came from another source that holds the same paper, and are counted there.
NO_REFERENCE_LISTS = ("bibtex", "acl-xml", "zotero", "arxiv", "s2ag-papers")

# A source's kind: its import format, but a fetched source is a kind of its own
# (``fetch:semanticscholar``, ``fetch:openalex``: ``citewise fetch``), not "openalex" beside a dump.
_KIND = "(CASE WHEN {s}path LIKE 'fetch:%' THEN {s}path ELSE {s}format END)"
_GROUP_COLUMN = {"kind": _KIND.format(s="s."), "file": "s.path", "all": "'all'"}

# Whether ``{x}`` names a stored paper: the ids (and their order) of ``citations.ref_map``.
_RESOLVES = (
    "(EXISTS (SELECT 1 FROM paper_ids WHERE ref = {x}) OR EXISTS (SELECT 1 FROM papers WHERE doi = {x}) "
    "OR EXISTS (SELECT 1 FROM papers WHERE arxiv = {x}) OR EXISTS (SELECT 1 FROM papers WHERE acl_id = {x}) "
    "OR EXISTS (SELECT 1 FROM papers WHERE uid = {x}) OR EXISTS (SELECT 1 FROM papers WHERE key = {x}))"
)
# Whether an edge row's citing paper is one of its own source's papers (evaluated only for sources
# that hold papers: an S2AG citations file holds none, and has millions of rows).
# ``citewise fetch``'s Graph API pages are the only edge rows of their papers (no paper of theirs
# carries a reference list), so none of them is left out.
_OWN_CITING = (
    "(s.papers > 0 AND s.path != 'fetch:semanticscholar' AND EXISTS (SELECT 1 FROM paper_sources ps WHERE ps.source = e.source AND ps.paper_id IN ("
    "SELECT paper_id FROM paper_ids WHERE ref = e.citing_ref UNION ALL "
    "SELECT id FROM papers WHERE doi = e.citing_ref UNION ALL SELECT id FROM papers WHERE arxiv = e.citing_ref "
    "UNION ALL SELECT id FROM papers WHERE acl_id = e.citing_ref UNION ALL "
    "SELECT id FROM papers WHERE uid = e.citing_ref UNION ALL SELECT id FROM papers WHERE key = e.citing_ref)))"
)


@dataclass(frozen=True)
class SourceSummary:
    """What one source (a file, or every file of one kind) gave the store."""

    name: str  # the file's path, or the kind
    kind: str  # the import format: bibtex, acl-xml, jsonl, citations, openalex, s2ag-citations...
    files: int
    papers: int = 0
    abstracts: int = 0
    edges: int = 0
    resolved_edges: int = 0
    sentences: int = 0

    @property
    def resolved_share(self) -> float | None:
        """The share of edges whose cited paper is stored (None: no edges)."""
        return self.resolved_edges / self.edges if self.edges else None

    @property
    def unresolved_edges(self) -> int:
        """Edges to papers the store does not hold: kept as unresolved references (they resolve
        when their paper is imported), but feeding neither the expansion nor the count prior."""
        return self.edges - self.resolved_edges

    def as_dict(self) -> dict[str, object]:
        share = self.resolved_share
        return {
            **asdict(self),
            "resolved_share": None if share is None else round(share, 4),
            "unresolved_references": self.unresolved_edges,
        }

    def counts(self) -> dict[str, int]:
        """The figures of :func:`holdings_words` under its words (``--json`` of ``citewise index``
        and of ``citewise info``)."""
        return {
            "files": self.files,
            "papers": self.papers,
            "abstracts": self.abstracts,
            "citation_edges": self.edges,
            "resolved_citation_edges": self.resolved_edges,
            "unresolved_references": self.unresolved_edges,
            "citing_sentences": self.sentences,
        }


def _n(count: int, word: str, plural: str = "") -> str:
    """``count`` and ``word``, plural unless one: "1 file", "3,653 files"."""
    return f"{count:,} {word if count == 1 else plural or word + 's'}"


def citation_words(s: SourceSummary) -> str:
    """What ``s`` knows of citations, in the words of the import summary and of ``citewise info``:
    "77 citation edges (0 to papers in the store, 77 unresolved references), 44 citing sentences"."""
    edges = _n(s.edges, "citation edge")
    if s.edges:
        edges += (
            f" ({s.resolved_edges:,} to papers in the store, "
            f"{_n(s.unresolved_edges, 'unresolved reference')})"
        )
    return f"{edges}, {_n(s.sentences, 'citing sentence')}"


def holdings_words(s: SourceSummary) -> str:
    """Papers, abstracts and :func:`citation_words` of ``s``: what an import's files hold."""
    return f"{_n(s.papers, 'paper')}, {_n(s.abstracts, 'abstract')}, {citation_words(s)}"


def source_kinds(store: Store) -> dict[str, int]:
    """Files by kind (import format), most files first: ``citewise info`` says kinds and files
    apart ("17 files of 3 kinds"), where a bare "sources: 17" read as 17 kinds of source."""
    kind = _KIND.format(s="")
    rows = store.conn.execute(f"SELECT {kind}, count(*) FROM sources GROUP BY {kind}").fetchall()
    return dict(sorted(((str(k), int(n)) for k, n in rows), key=lambda kv: (-kv[1], kv[0])))


def sources_words(kinds: dict[str, int]) -> str:
    """ "17 files of 3 kinds (bibtex 15, openalex 1, s2ag-citations 1)"; "no sources" for none."""
    if not kinds:
        return "no sources"
    listed = ", ".join(f"{kind} {n:,}" for kind, n in kinds.items())
    return f"{_n(sum(kinds.values()), 'file')} of {_n(len(kinds), 'kind')} ({listed})"


@dataclass(frozen=True)
class _Scope:
    """The sources a summary counts: every one (``sources s``), or the files of one import."""

    table: str = "sources s"
    params: tuple[str, ...] = ()

    @classmethod
    def of(cls, only: Collection[str] | None) -> _Scope:
        if only is None:
            return cls()
        # One JSON parameter, not one per file: an import may name thousands of files.
        where = "(SELECT * FROM sources WHERE path IN (SELECT value FROM json_each(?))) s"
        return cls(where, (json.dumps(sorted(only)),))


def summarize_sources(
    store: Store, by: Grouping = "kind", only: Collection[str] | None = None
) -> list[SourceSummary]:
    """Every source of the store (or those of ``only``, paths as recorded), grouped by kind
    (format), by file or all together, largest first."""
    conn, scope = store.conn, _Scope.of(only)
    group = _GROUP_COLUMN[by]
    files = {
        name: (kind, n)
        for name, kind, n in conn.execute(
            f"SELECT {group}, min({_KIND.format(s='s.')}), count(*) FROM {scope.table} GROUP BY {group}",
            scope.params,
        )
    }
    # A count, or (count, count of a part) where a query counts both (papers with an abstract).
    counts: dict[str, dict[str, int | list[int | None]]] = {name: {} for name in files}
    for field, rows in (
        ("papers", _papers(conn, group, scope)),
        ("references", _references(conn, group, scope)),
        ("pairs", _edge_pairs(conn, group, scope)),
        ("kept_abstracts", _kept_abstracts(conn, group, scope)),
        ("sentences", _sentences(conn, group, scope)),
    ):
        for name, *values in rows:
            if name in counts:
                counts[name][field] = values if len(values) > 1 else values[0]
    out = [_summary(name, kind, n, counts[name]) for name, (kind, n) in files.items()]
    return sorted(out, key=lambda s: (-s.papers, -s.edges, -s.sentences, s.name))


def summarize_total(store: Store, only: Collection[str] | None = None) -> SourceSummary:
    """The whole store (or the files of ``only``) as one source: each paper, reference and pair
    once however many files hold it. ``citewise info``'s headline and an import's summary."""
    rows = summarize_sources(store, "all", only)
    if not rows:
        return SourceSummary("all", "all", files=0)
    return replace(rows[0], kind="all")


def _summary(name: str, kind: str, files: int, got: dict) -> SourceSummary:
    papers, with_abstract = got.get("papers", (0, 0))
    refs, refs_resolved = got.get("references", (0, 0))
    pairs, pairs_resolved = got.get("pairs", (0, 0))
    return SourceSummary(
        name=name,
        kind=kind,
        files=files,
        papers=int(papers),
        abstracts=int(with_abstract or 0) + int(got.get("kept_abstracts", 0)),
        edges=int(refs) + int(pairs),
        resolved_edges=int(refs_resolved or 0) + int(pairs_resolved or 0),
        sentences=int(got.get("sentences", 0)),
    )


def _papers(conn: sqlite3.Connection, group: str, scope: _Scope) -> list[tuple]:
    """(group, papers, papers with an abstract): each paper once per group."""
    return conn.execute(
        "SELECT d.g, count(*), sum(p.abstract != '') FROM (SELECT DISTINCT "
        f"{group} AS g, ps.paper_id AS pid FROM {scope.table} JOIN paper_sources ps ON ps.source = s.path) d "
        "JOIN papers p ON p.id = d.pid GROUP BY d.g",
        scope.params,
    ).fetchall()


def _references(conn: sqlite3.Connection, group: str, scope: _Scope) -> list[tuple]:
    """(group, reference-list edges of its papers, those resolved to a stored paper)."""
    marks = ", ".join("?" * len(NO_REFERENCE_LISTS))
    return conn.execute(
        "SELECT d.g, count(*), count(c.cited) FROM (SELECT DISTINCT "
        f"{group} AS g, ps.paper_id AS pid FROM {scope.table} JOIN paper_sources ps ON ps.source = s.path "
        f"WHERE s.format NOT IN ({marks})) d JOIN citations c ON c.citing = d.pid GROUP BY d.g",
        (*scope.params, *NO_REFERENCE_LISTS),
    ).fetchall()


def _has_edges(conn: sqlite3.Connection) -> bool:
    """Whether ``citation_edges`` exists (the first citation import creates it)."""
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='citation_edges'").fetchone()
        is not None
    )


def _edge_pairs(conn: sqlite3.Connection, group: str, scope: _Scope) -> list[tuple]:
    """(group, distinct citing -> cited pairs of its edge rows, those resolved), leaving out the
    rows that cite from the source's own papers (their reference lists count them)."""
    if not _has_edges(conn):
        return []
    return conn.execute(
        f"SELECT d.g, count(*), sum({_RESOLVES.format(x='d.cited_ref')}) FROM (SELECT DISTINCT {group} AS g, "
        "e.citing_ref AS citing_ref, e.cited_ref AS cited_ref FROM citation_edges e "
        f"JOIN {scope.table} ON s.path = e.source WHERE NOT {_OWN_CITING}) d GROUP BY d.g",
        scope.params,
    ).fetchall()


def _sentences(conn: sqlite3.Connection, group: str, scope: _Scope) -> list[tuple]:
    """(group, edge rows with a citing sentence)."""
    if not _has_edges(conn):
        return []
    return conn.execute(
        f"SELECT {group}, count(*) FROM citation_edges e JOIN {scope.table} ON s.path = e.source "
        f"WHERE e.context != '' GROUP BY {group}",
        scope.params,
    ).fetchall()


def _kept_abstracts(conn: sqlite3.Connection, group: str, scope: _Scope) -> list[tuple]:
    """(group, abstracts kept apart from their papers: S2AG ``abstracts``)."""
    return conn.execute(
        f"SELECT {group}, count(*) FROM source_abstracts a JOIN {scope.table} ON s.path = a.source "
        f"GROUP BY {group}",
        scope.params,
    ).fetchall()
