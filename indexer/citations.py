"""Citation edges and citing sentences imported from files of their own, and what they tell the
ranking: the text others wrote when citing a paper (document expansion) and how often it is cited.

Why: many papers are known to a store by their title alone (978 of the 982 papers cited by the ACL
dev sentences have no abstract in the ACL XML), so "we report BLEU scores" cannot match the BLEU
paper's text; the sentences that cite it, and the titles of the papers that cite it, say what it is
used for. Formats (``docs/citation-expansion.md``), recognised by their content:

- TSV with a header naming ``citing`` and ``cited`` columns, optionally ``context`` (or ``text``):
  one edge a line (``acl-citation-edges.tsv``: Anthology ids);
- JSON Lines whose objects have ``citing`` and ``cited`` (an id or a list of ids), optionally
  ``text`` or ``context``: one citing sentence (or edge) a line (``scisummnet-citances.jsonl``).

Ids are any the store knows a paper by (Anthology id, DOI, arXiv id, key), matched when the index
is built, so edges may be imported before or after their papers. A file is one transaction: a bad
line aborts it with one message naming the line, and nothing of that file is kept.

The edges live in ``citation_edges``, a table created by the first citation import: stores without
citation files are left exactly as they were (no schema version change for data most stores lack).
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from citewise.errors import CitewiseError

from .sources.ids import canonical_ref
from .store import Store

FORMAT = "citations"
_DDL = (
    "CREATE TABLE IF NOT EXISTS citation_edges (source TEXT NOT NULL, line INTEGER NOT NULL, "
    "citing_ref TEXT NOT NULL, cited_ref TEXT NOT NULL, context TEXT NOT NULL DEFAULT '', "
    "intents TEXT NOT NULL DEFAULT '', influential INTEGER)",
    "CREATE INDEX IF NOT EXISTS citation_edges_cited ON citation_edges(cited_ref)",
    "CREATE INDEX IF NOT EXISTS citation_edges_source ON citation_edges(source)",
)
_CONTEXT_COLUMNS = ("context", "text", "sentence")


class CitationFileError(CitewiseError):
    """A citation file that cannot be imported; the message names the file and line."""


@dataclass(frozen=True)
class CitationEdge:
    """One ``citing -> cited`` pair, with the sentence that cites when the file has one, and what
    a source says of it (S2AG: the intents of the sentence, comma-separated, and whether the
    citation is influential; None where unknown)."""

    citing: str
    cited: str
    context: str = ""
    line: int = 0
    intents: str = ""
    influential: bool | None = None


@dataclass
class Expansion:
    """What a paper's citers say about it: their sentences and titles, and how many cite it."""

    texts: list[str] = field(default_factory=list)
    citing: set[str] = field(default_factory=set)  # ids of the citing papers (their count is the prior)

    @property
    def text(self) -> str:
        return "\n".join(self.texts)


def normalize_id(ref: str) -> str:
    """One spelling per identifier (DOIs, arXiv ids and the open sources' ids: CorpusId:,
    OpenAlex, PMID: ... normalised, see ``sources/ids.py``; Anthology ids and keys as is)."""
    return canonical_ref(ref)


# -- reading files ------------------------------------------------------------------------------
def sniff(path: Path) -> bool:
    """Whether ``path`` is a citation file (TSV header or first JSON object naming citing and cited)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            first = next((line for line in fh if line.strip()), "")
    except OSError:
        return False
    if path.suffix.lower() in (".tsv", ".tab"):
        return {"citing", "cited"} <= {c.strip().lower() for c in first.split("\t")}
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):  # nested too deeply: not a citation row either
        return False
    return isinstance(obj, dict) and "citing" in obj and "cited" in obj and "title" not in obj


def read_edges(path: Path) -> Iterator[CitationEdge]:
    """The edges of a citation file, in file order; raises :class:`CitationFileError` on a bad line."""
    if path.suffix.lower() in (".tsv", ".tab"):
        yield from _read_tsv(path)
    else:
        yield from _read_jsonl(path)


def _read_tsv(path: Path) -> Iterator[CitationEdge]:
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = [c.strip().lower() for c in next(reader, [])]
        if "citing" not in header or "cited" not in header:
            raise CitationFileError(
                f"{path}:1: a citation TSV needs a header line naming 'citing' and 'cited' columns "
                f"(got {header[:6]})"
            )
        i_citing, i_cited = header.index("citing"), header.index("cited")
        i_ctx = next((header.index(c) for c in _CONTEXT_COLUMNS if c in header), None)
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) <= max(i_citing, i_cited):
                raise CitationFileError(f"{path}:{line}: {len(row)} columns, the header has {len(header)}")
            context = row[i_ctx].strip() if i_ctx is not None and i_ctx < len(row) else ""
            yield _edge(path, line, row[i_citing], row[i_cited], context)


def _read_jsonl(path: Path) -> Iterator[CitationEdge]:
    with open(path, encoding="utf-8") as fh:
        for line, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError as exc:
                raise CitationFileError(f"{path}:{line}: not a JSON object ({exc})") from None
            if not isinstance(obj, dict) or "citing" not in obj or "cited" not in obj:
                raise CitationFileError(f"{path}:{line}: a citation record needs 'citing' and 'cited'")
            cited = obj["cited"] if isinstance(obj["cited"], list) else [obj["cited"]]
            context = next((obj[c] for c in _CONTEXT_COLUMNS if isinstance(obj.get(c), str)), "")
            for ref in cited:
                yield _edge(path, line, obj["citing"], ref, context.strip())


def _edge(path: Path, line: int, citing: object, cited: object, context: str) -> CitationEdge:
    if not isinstance(citing, str) or not isinstance(cited, str) or not citing.strip() or not cited.strip():
        raise CitationFileError(f"{path}:{line}: 'citing' and 'cited' must be non-empty ids")
    return CitationEdge(normalize_id(citing), normalize_id(cited), " ".join(context.split()), line)


# -- the store's side ---------------------------------------------------------------------------
def has_edges(store: Store) -> bool:
    """Whether the store holds imported citation edges (the table exists and has rows)."""
    row = store.conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='citation_edges'"
    ).fetchone()
    return (
        row is not None and store.conn.execute("SELECT 1 FROM citation_edges LIMIT 1").fetchone() is not None
    )


def citation_edge_count(store: Store) -> int:
    """Edges imported from citation files (``citewise info``)."""
    return (
        int(store.conn.execute("SELECT count(*) FROM citation_edges").fetchone()[0])
        if has_edges(store)
        else 0
    )


def import_citation_file(
    store: Store,
    path: str | os.PathLike[str],
    *,
    keep: Callable[[CitationEdge], bool] | None = None,
    on_record: Callable[[], None] | None = None,
) -> int:
    """Replace the edges of ``path`` in the store, in one transaction; returns the edges stored.

    ``keep`` filters edges (the evaluation store leaves out citing papers of the dev years). The
    papers that the file cites are marked changed, so the search index folds their new expansion
    text in; the file is recorded as a source, so ``citewise index --drop FILE`` forgets it."""
    source = str(Path(path).resolve())
    st = os.stat(source)
    stored = 0
    with store._transaction() as conn:
        for statement in _DDL:
            conn.execute(statement)
        before = _cited_refs(conn, source)
        conn.execute("DELETE FROM citation_edges WHERE source=?", (source,))
        for edge in read_edges(Path(source)):
            if on_record is not None:
                on_record()
            if keep is not None and not keep(edge):
                continue
            conn.execute(
                "INSERT INTO citation_edges(source, line, citing_ref, cited_ref, context) VALUES (?, ?, ?, ?, ?)",
                (source, edge.line, edge.citing, edge.cited, edge.context),
            )
            stored += 1
        _touch(conn, before | _cited_refs(conn, source))
        conn.execute(
            "INSERT OR REPLACE INTO sources(path, format, mtime, size, imported_at, papers) VALUES (?, ?, ?, ?, ?, 0)",
            (source, FORMAT, st.st_mtime, st.st_size, time.time()),
        )
        store._bump_generation(conn)
    return stored


def replace_record_contexts(store: Store, source: str, edges: list[CitationEdge]) -> None:
    """The citing sentences that the paper records of ``source`` give their references (JSON
    Lines ``contexts``), replacing what that source gave before; the papers' own import wrote
    the records and their reference lists. A source without any writes nothing."""
    if not edges and not (has_edges(store) and _cited_refs(store.conn, source)):
        return
    with store._transaction() as conn:
        write_record_contexts(conn, source, edges)
        store._bump_generation(conn)


def write_record_contexts(conn: sqlite3.Connection, source: str, edges: list[CitationEdge]) -> bool:
    """:func:`replace_record_contexts` inside the caller's transaction (the one that writes the
    source's papers: ``Store.import_source``'s ``finish``); returns whether anything changed."""
    tables = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='citation_edges'")
    if not edges and (tables.fetchone() is None or not _cited_refs(conn, source)):
        return False
    for statement in _DDL:
        conn.execute(statement)
    before = _cited_refs(conn, source)
    conn.execute("DELETE FROM citation_edges WHERE source=?", (source,))
    conn.executemany(
        "INSERT INTO citation_edges(source, line, citing_ref, cited_ref, context, intents, influential) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (
                source,
                e.line,
                normalize_id(e.citing),
                normalize_id(e.cited),
                e.context,
                e.intents,
                e.influential,
            )
            for e in edges
        ],
    )
    _touch(conn, before | _cited_refs(conn, source))
    return True


def drop_citation_source(store: Store, source: str) -> int:
    """Forget the edges of one citation file; returns how many went."""
    if not has_edges(store):
        return 0
    with store._transaction() as conn:
        refs = _cited_refs(conn, source)
        gone = conn.execute("DELETE FROM citation_edges WHERE source=?", (source,)).rowcount
        _touch(conn, refs)
        if gone:
            store._bump_generation(conn)
    return int(gone)


def _cited_refs(conn, source: str) -> set[str]:
    return {
        r for (r,) in conn.execute("SELECT DISTINCT cited_ref FROM citation_edges WHERE source=?", (source,))
    }


def _touch(conn, refs: Iterable[str]) -> None:
    """Mark the papers behind ``refs`` changed, so the BM25 delta (or rebuild) re-reads them."""
    refs = sorted(refs)
    now = time.time()
    for i in range(0, len(refs), 400):
        chunk = refs[i : i + 400]
        marks = ",".join("?" * len(chunk))
        conn.execute(
            f"UPDATE papers SET updated_at=? WHERE acl_id IN ({marks}) OR doi IN ({marks}) "
            f"OR arxiv IN ({marks}) OR key IN ({marks}) OR uid IN ({marks}) "
            f"OR id IN (SELECT paper_id FROM paper_ids WHERE ref IN ({marks}))",
            (now, *chunk * 6),
        )


_ID_COLUMNS = ("key", "uid", "acl_id", "arxiv", "doi")  # later ones win: a DOI match first


def ref_map(store: Store) -> dict[str, int]:
    """Every identifier a stored paper answers to -> its id (the precedence of
    ``Store.resolve_citations``: DOI, arXiv id, Anthology id, stable id, key)."""
    out: dict[str, int] = {}
    rows = store.conn.execute(f"SELECT id, {', '.join(_ID_COLUMNS)} FROM papers ORDER BY id").fetchall()
    for column in range(1, len(_ID_COLUMNS) + 1):
        for row in rows:
            if row[column]:
                out[row[column]] = row[0]
    # The open sources' ids (paper_ids), only those that an edge names: a store of OpenAlex works
    # holds several per paper, and most are never cited by an imported edge.
    out.update(
        store.conn.execute(
            "SELECT i.ref, i.paper_id FROM paper_ids i WHERE i.ref IN (SELECT cited_ref FROM citation_edges) "
            "OR i.ref IN (SELECT citing_ref FROM citation_edges)"
        )
    )
    return out


def _chunks(values: Iterable, size: int = 500) -> Iterator[list]:
    values = list(values)
    for i in range(0, len(values), size):
        yield values[i : i + size]


def _resolve(store: Store, refs: Iterable[str]) -> dict[str, int]:
    """``ref_map`` for a few identifiers only (the BM25 delta of a few changed papers)."""
    out: dict[str, int] = {}
    for column in _ID_COLUMNS:
        for chunk in _chunks(set(refs)):
            marks = ",".join("?" * len(chunk))
            out.update(
                (ref, pid)
                for pid, ref in store.conn.execute(
                    f"SELECT id, {column} FROM papers WHERE {column} IN ({marks}) ORDER BY id", chunk
                )
            )
    for chunk in _chunks(set(refs)):
        marks = ",".join("?" * len(chunk))
        out.update(store.conn.execute(f"SELECT ref, paper_id FROM paper_ids WHERE ref IN ({marks})", chunk))
    return out


def _edge_rows(store: Store, pids: set[int] | None) -> tuple[list[tuple[str, str, str]], dict[str, int]]:
    """The imported edges that point at ``pids`` (all when None), and the ids resolving them."""
    if pids is None:
        every = store.conn.execute("SELECT citing_ref, cited_ref, context FROM citation_edges ORDER BY rowid")
        return every.fetchall(), ref_map(store)
    own: dict[str, int] = {}
    for chunk in _chunks(pids):
        marks = ",".join("?" * len(chunk))
        for pid, *ids in store.conn.execute(
            f"SELECT id, {', '.join(_ID_COLUMNS)} FROM papers WHERE id IN ({marks})", chunk
        ):
            own.update((ref, pid) for ref in ids if ref)
        own.update(
            (ref, pid)
            for ref, pid in store.conn.execute(
                f"SELECT ref, paper_id FROM paper_ids WHERE paper_id IN ({marks})", chunk
            )
        )
    rows: list[tuple[str, str, str]] = []
    for chunk in _chunks(own):
        marks = ",".join("?" * len(chunk))
        rows += store.conn.execute(
            f"SELECT citing_ref, cited_ref, context FROM citation_edges WHERE cited_ref IN ({marks}) "
            "ORDER BY rowid",
            chunk,
        ).fetchall()
    return rows, {**_resolve(store, {citing for citing, _, _ in rows}), **own}


def expansions(
    store: Store, pids: Iterable[int] | None = None, without_citing: Collection[str] = ()
) -> dict[int, Expansion]:
    """For each cited paper (all, or those of ``pids``), its citing sentences and citing titles.

    Edges come from imported citation files and from papers' own reference lists (the
    ``citations`` table, e.g. JSON Lines ``references``); a citing title is counted once per
    cited paper, however many sentences its paper wrote. With ``pids`` only their edges are read
    (a BM25 delta: milliseconds, where resolving every edge of the ACL store takes seconds).
    ``without_citing``: citing papers whose edges are left out, by their id in the edge file or
    as ``#paper_id`` (training leaves out the paper its query sentence comes from)."""
    wanted = None if pids is None else set(pids)
    pairs: list[tuple[int, str, int | None, str]] = []  # cited pid, citing id, citing pid, context
    if has_edges(store):
        rows, refs = _edge_rows(store, wanted)
        for citing, cited, context in rows:
            pid = refs.get(cited)
            if pid is not None and (wanted is None or pid in wanted):
                pairs.append((pid, citing, refs.get(citing), context))
    if wanted is None:
        graph = store.conn.execute("SELECT citing, cited FROM citations WHERE cited IS NOT NULL").fetchall()
    else:
        graph = []
        for chunk in _chunks(wanted):
            marks = ",".join("?" * len(chunk))
            graph += store.conn.execute(
                f"SELECT citing, cited FROM citations WHERE cited IN ({marks})", chunk
            ).fetchall()
    pairs += [(cited, f"#{citing}", citing, "") for citing, cited in graph if citing != cited]
    if without_citing:
        pairs = [p for p in pairs if p[1] not in without_citing and f"#{p[2]}" not in without_citing]
    return _gather(store, pairs)


def _gather(store: Store, pairs: list[tuple[int, str, int | None, str]]) -> dict[int, Expansion]:
    titles: dict[int, str] = {}
    for chunk in _chunks({c for _, _, c, _ in pairs if c is not None}):
        marks = ",".join("?" * len(chunk))
        titles.update(store.conn.execute(f"SELECT id, title FROM papers WHERE id IN ({marks})", chunk))
    out: dict[int, Expansion] = {}
    for pid, citing, citing_pid, context in pairs:
        exp = out.setdefault(pid, Expansion())
        key = f"#{citing_pid}" if citing_pid is not None else citing
        if context:
            exp.texts.append(context)
        if key not in exp.citing:
            exp.citing.add(key)
            if citing_pid is not None and citing_pid != pid and titles.get(citing_pid):
                exp.texts.append(titles[citing_pid])
    return out
