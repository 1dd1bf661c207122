"""Which open source a file is, from its content (its first record), whatever it is called.

Why content: the dumps' names say little (``0000_part_00.gz``, ``20230203_070203_00004_xyz.gz``,
``arxiv-metadata-oai-snapshot.json``), and a user's download is named as they please. A file of
one of these sources but of a kind citewise does not import (an OpenAlex *authors* part, S2AG's
``authors`` dataset, a Crossref *members* response) raises :class:`WrongKind`, whose message says
what the file is and what citewise imports instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import arxiv, crossref, openalex, s2ag, s2orc, unarxive
from .stream import GZIP_MAGIC, ZSTD_MAGIC, first_values

# The formats of this package, in the order ``--format`` lists them, and what each reads.
FORMATS: dict[str, str] = {
    openalex.FORMAT: "OpenAlex works (snapshot parts, API JSON)",
    s2ag.PAPERS: "Semantic Scholar Academic Graph papers",
    s2ag.ABSTRACTS: "Semantic Scholar Academic Graph abstracts",
    s2ag.CITATIONS: "Semantic Scholar Academic Graph citations",
    s2ag.API: "Semantic Scholar Graph API JSON",
    arxiv.FORMAT: "arXiv metadata snapshot",
    crossref.FORMAT: "Crossref works (API JSON, public data file)",
    unarxive.FORMAT: "unarXive full text (citing sentences)",
    s2orc.FORMAT: "S2ORC metadata (and the 2019 release's combined rows)",
    s2orc.PARSES: "S2ORC pdf_parses (citing sentences)",
}
# Formats whose streams carry citing sentences beside their papers (CitationEdge items).
CONTEXT_FORMATS = (s2ag.API, unarxive.FORMAT, s2orc.FORMAT)
# Formats whose files hold citation edges only, imported after the papers (indexer/importer.py),
# and what reads each.
EDGE_READERS = {s2ag.CITATIONS: s2ag.iter_citations, s2orc.PARSES: s2orc.iter_parses}
_JSON_SUFFIXES = (".json", ".jsonl", ".ndjson", ".gz", ".zst", ".zstd")


class WrongKind(Exception):
    """A file of an open source that citewise does not import; the message says what it is."""


def worth_sniffing(path: Path) -> bool:
    """Whether ``path`` may be one of these sources: a JSON or compressed name, or no extension
    and content that starts like JSON or a compressed stream (S2AG release files have no suffix)."""
    name = path.name.lower()
    if name.endswith(_JSON_SUFFIXES):
        return True
    if path.suffix or name.startswith("."):
        return False
    try:
        with open(path, "rb") as fh:
            start = fh.read(4)
    except OSError:
        return False
    return start.startswith(GZIP_MAGIC) or start == ZSTD_MAGIC or start.lstrip()[:1] in (b"{", b"[")


def classify(value: Any) -> str | None:
    """The format of a file whose first JSON value is ``value`` (None: none of these sources)."""
    probe = value[0] if isinstance(value, list) and value else value
    if openalex.is_page(value) or openalex.is_work(probe):
        return openalex.FORMAT
    if (kind := openalex.entity_kind(probe)) and kind != "works":
        raise WrongKind(f"an OpenAlex {kind} file; citewise imports OpenAlex works")
    if kind := crossref.response_kind(value):
        if kind != "works":
            raise WrongKind(f"a Crossref '{kind}' response; citewise imports Crossref works")
        return crossref.FORMAT
    if crossref.is_work(probe):
        return crossref.FORMAT
    if kind := s2orc.row_kind(probe):  # before unarXive: doc2json output has unarXive's shape
        if kind == s2orc.DOC2JSON:
            raise WrongKind(s2orc.DOC2JSON_MESSAGE)
        return s2orc.PARSES if kind == s2orc.PARSE else s2orc.FORMAT
    if unarxive.is_paper(probe):
        return unarxive.FORMAT
    if arxiv.is_snapshot_line(probe):
        return arxiv.FORMAT
    kind = s2ag.dataset_kind(value)
    if kind.startswith("other:"):
        raise WrongKind(
            f"a Semantic Scholar Academic Graph {kind[6:]} dataset; citewise imports its papers, "
            "abstracts and citations datasets"
        )
    return kind or None


def sniff(path: Path) -> str | None:
    """The format of ``path`` if it is one of the open sources (raises :class:`WrongKind`, or
    :class:`~citewise.indexer.sources.stream.StreamError` for an unreadable ``.zst``)."""
    if not worth_sniffing(path):
        return None
    # The first record that some source claims decides: one record without its id (an arXiv
    # line without ``id``) must not make the whole file be read as citewise's own JSON Lines.
    for value in first_values(path):
        if found := classify(value):
            return found
    return None


def reader(fmt: str):
    """The record reader of a paper format of this package (papers, with edges for ``s2-api``),
    or of an edge format (its edges: what an estimate samples)."""
    readers = {
        openalex.FORMAT: openalex.iter_openalex,
        s2ag.PAPERS: s2ag.iter_papers,
        s2ag.API: s2ag.iter_api,
        arxiv.FORMAT: arxiv.iter_arxiv,
        crossref.FORMAT: crossref.iter_crossref,
        unarxive.FORMAT: unarxive.iter_unarxive,
        s2orc.FORMAT: s2orc.iter_s2orc,
    }
    return readers.get(fmt) or EDGE_READERS.get(fmt)
