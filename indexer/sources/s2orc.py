"""S2ORC, the Semantic Scholar Open Research Corpus, as its static releases publish it: the
2020-07-05 release's ``metadata`` and ``pdf_parses`` files (JSON Lines, gzipped, one paper a line)
and the combined rows of the releases before it (2019-09-28; the 2020-05 example paper).

- A ``metadata`` row is a paper: ``title``, ``authors`` (``first``/``middle``/``last``/``suffix``),
  ``year``, ``venue`` or ``journal``, ``abstract`` (``:::`` marks a structured abstract's breaks),
  the ids (``doi``, ``arxiv_id``, ``acl_id``, ``pubmed_id``, ``pmc_id``, ``mag_id``: several MAG
  ids in one string, comma-separated) and ``outbound_citations`` as its citation edges.
- A ``pdf_parses`` row is the full text of a paper of the metadata files: every citation span of
  its ``body_text`` paragraphs whose ``bib_entries[ref_id].link`` names an S2ORC paper gives the
  sentence around it as a citing sentence of that paper (the sentence logic of unarXive,
  indexer/sources/unarxive.py). Such a file holds no paper, only edges: it is imported like S2AG
  ``citations`` (after the papers, through the edge filters), format ``s2orc-pdf-parses``.
- A combined row (``metadata`` beside ``grobid_parse`` / ``latex_parse``, whose entries say
  ``links``) is both: the paper, and the citing sentences of its parse (LaTeX's when it has one).

Why every S2ORC id is a corpus id (``corpusid:<paper_id>``): a 2020-07 ``paper_id`` is the paper's
Semantic Scholar corpus id (its ``s2_url`` is ``.../CorpusID:<paper_id>``), and so is every
``link`` and ``outbound_citations`` item; S2AG names papers by the same ids, so a paper met in both
is one stored paper, and S2ORC's citing sentences reach a paper imported from S2AG (or from any
source that gave it a DOI, arXiv or MAG id that the S2ORC row also carries). A bibliography entry
without a link names its paper by the DOI or arXiv id in ``other_ids`` where the release gives one.

The output of s2orc-doc2json run on one's own PDFs (``paper_id`` a PDF hash, a bibliography linked
to nothing) is not a release; it is told apart and refused with a message saying so.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..citations import CitationEdge
from ..jsonl import RecordError
from ..records import ImportProblem, PaperRecord
from .ids import PaperIds, arxiv_id, scheme_ref, split_doi
from .stream import iter_converted
from .text import clean
from .unarxive import citing_sentences

FORMAT = "s2orc"
PARSES = "s2orc-pdf-parses"
METADATA, PARSE, COMBINED, DOC2JSON = "metadata", "parse", "combined", "doc2json"
_METADATA_KEYS = ("outbound_citations", "inbound_citations", "s2_url", "mag_field_of_study")


def row_kind(obj: Any) -> str:
    """Which S2ORC row ``obj`` is (``METADATA``, ``PARSE``, ``COMBINED``, ``DOC2JSON``) or ``""``."""
    if not isinstance(obj, dict) or not isinstance(obj.get("paper_id"), str):
        return ""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        if "grobid_parse" in obj or "latex_parse" in obj:
            return COMBINED
        if "back_matter" in obj and "id" not in meta and "authors_parsed" not in meta:
            return DOC2JSON  # not unarXive, whose metadata is an arXiv snapshot record
        return ""
    if "title" in obj and any(key in obj for key in _METADATA_KEYS):
        return METADATA
    if isinstance(obj.get("body_text"), list) and isinstance(obj.get("bib_entries"), dict):
        return PARSE
    return ""


def _str(value: Any) -> str:
    return clean(value) if isinstance(value, str) else ""


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def corpus_ref(value: Any) -> str:
    """``corpusid:<n>`` for a paper id or link (``"7229756"``; the 2019 ``links`` may list
    several, comma-separated: the first), ``""`` for anything else."""
    if isinstance(value, str):
        value = value.split(",", 1)[0]
    return scheme_ref("corpusid", value) if isinstance(value, (str, int)) else ""


def _author(item: Any) -> str:
    """``Last, First Middle`` (``Last, Suffix, First Middle`` with a suffix: BibTeX's order)."""
    if not isinstance(item, dict):
        return ""
    middle = item.get("middle")
    given = [item.get("first"), *(middle if isinstance(middle, list) else [middle])]
    first = " ".join(part for part in map(_str, given) if part)
    parts = [_str(item.get("last")), _str(item.get("suffix")), first]
    return ", ".join(part for part in parts if part)


def _authors(meta: dict[str, Any]) -> list[str]:
    value = meta.get("authors")
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(f"'authors' must be a list, not {type(value).__name__}")
    return [name for name in map(_author, value) if name]


def _year(meta: dict[str, Any]) -> int | None:
    year = meta.get("year")
    if isinstance(year, str) and year.strip().isdigit():
        year = int(year)
    if isinstance(year, int) and not isinstance(year, bool) and 0 < year <= 9999:
        return year
    return None


def _ids(paper_id: str, meta: dict[str, Any]) -> PaperIds:
    ids = PaperIds()
    ids.add("corpusid", paper_id)
    ids.add("doi", meta.get("doi"))
    ids.add("arxiv", meta.get("arxiv_id"))
    ids.add("acl", meta.get("acl_id"))
    ids.add("pmid", meta.get("pubmed_id"))
    ids.add("pmcid", meta.get("pmc_id"))
    mag = meta.get("mag_id")
    for value in mag.split(",") if isinstance(mag, str) else [mag]:
        ids.add("mag", value)
    return ids


def record_from_metadata(paper_id: str, meta: dict[str, Any], source: str, line: int) -> PaperRecord:
    """One paper's metadata as a record (its references: ``outbound_citations``)."""
    title = _str(meta.get("title"))
    if not title:
        raise RecordError("no title")
    if not scheme_ref("corpusid", paper_id):
        raise RecordError(f"'paper_id' is not an S2ORC paper id: {paper_id[:60]!r}")
    ids = _ids(paper_id, meta)
    abstract = meta.get("abstract")
    outbound = meta.get("outbound_citations")
    fields = meta.get("mag_field_of_study")
    return PaperRecord(
        title=title,
        abstract=clean(abstract.replace(":::", " ")) if isinstance(abstract, str) else "",
        authors=_authors(meta),
        year=_year(meta),
        venue=_str(meta.get("venue")) or _str(meta.get("journal")),
        key=ids.refs[0],
        doi=ids.doi,
        arxiv=ids.arxiv,
        acl_id=ids.acl,
        source=source,
        source_line=line,
        references=list(dict.fromkeys(filter(None, map(corpus_ref, _list(outbound))))),
        ids=ids.refs,
        subjects=[f for f in _list(fields) if isinstance(f, str) and f],
    )


def _other_id(entry: dict[str, Any]) -> str:
    """The DOI or arXiv id an unlinked entry gives in ``other_ids`` (lists of strings)."""
    other = entry.get("other_ids")
    if not isinstance(other, dict):
        return ""
    for name, value in other.items():
        first = value[0] if isinstance(value, list) and value else value
        if name.lower() == "doi":
            doi, doi_arxiv = split_doi(first)  # a DataCite arXiv DOI names the arXiv paper
            if doi_arxiv or doi:
                return doi_arxiv or doi
        if name.lower() == "arxiv" and (found := arxiv_id(first)):
            return found
    return ""


def entry_ref(entry: Any) -> str:
    """The ref a bibliography entry names its paper by: its S2ORC link (``link``; ``links`` in
    the 2019 format), else a DOI or arXiv id; ``""`` when it names none."""
    if not isinstance(entry, dict):
        return ""
    return corpus_ref(entry.get("link")) or corpus_ref(entry.get("links")) or _other_id(entry)


def parse_edges(paper_id: str, parse: Any, line: int) -> Iterator[CitationEdge]:
    """The citing sentences of one PDF (or LaTeX) parse: ``body_text`` spans resolved through
    ``bib_entries``; raises :class:`RecordError` for a ``paper_id`` that is no corpus id."""
    citing = scheme_ref("corpusid", paper_id)
    if not citing:
        raise RecordError(f"'paper_id' is not an S2ORC paper id: {paper_id[:60]!r}")
    if not isinstance(parse, dict) or not isinstance(parse.get("bib_entries"), dict):
        return
    refs = {key: ref for key, entry in parse["bib_entries"].items() if (ref := entry_ref(entry))}
    if refs:
        yield from citing_sentences(parse.get("body_text"), citing, refs, line)


def _parse_of(row: dict[str, Any]) -> Any:
    """A combined row's parse: LaTeX's where there is one (exact spans), else GROBID's."""
    latex = row.get("latex_parse")
    if isinstance(latex, dict) and latex.get("body_text"):
        return latex
    return row.get("grobid_parse")


def items_from_row(row: Any, source: str, line: int) -> Iterator[PaperRecord | CitationEdge]:
    """What one row gives: a paper, citing sentences, or both; raises :class:`RecordError`."""
    kind = row_kind(row)
    if kind == METADATA:
        yield record_from_metadata(row["paper_id"], row, source, line)
    elif kind == PARSE:
        yield from parse_edges(row["paper_id"], row, line)
    elif kind == COMBINED:
        parse = _parse_of(row)
        record = record_from_metadata(row["paper_id"], row["metadata"], source, line)
        if isinstance(parse, dict) and isinstance(parse.get("bib_entries"), dict):
            refs = (entry_ref(entry) for entry in parse["bib_entries"].values())
            record.references = list(dict.fromkeys(filter(None, refs)))
        yield record
        yield from parse_edges(row["paper_id"], parse, line)
    elif kind == DOC2JSON:
        raise RecordError(DOC2JSON_MESSAGE)
    else:
        raise RecordError(
            "not an S2ORC row (needs 'paper_id' with metadata, or 'body_text' and 'bib_entries')"
        )


DOC2JSON_MESSAGE = (
    "an s2orc-doc2json parse of a PDF (its bibliography is linked to no paper); citewise imports "
    "the S2ORC releases' metadata and pdf_parses files"
)


def iter_s2orc(path: str | Path) -> Iterator[PaperRecord | CitationEdge | ImportProblem]:
    """Papers and citing sentences of an S2ORC file, streaming; a bad row is reported and skipped."""
    return iter_converted(path, items_from_row)


def iter_parses(path: str | Path) -> Iterator[CitationEdge | ImportProblem]:
    """The citing sentences of a ``pdf_parses`` file (the edge import's reader); a row that is
    not a parse is reported with its line."""
    return iter_converted(path, _parse_row)


def _parse_row(row: Any, source: str, line: int) -> Iterator[CitationEdge]:
    kind = row_kind(row)
    if kind != PARSE:
        what = f"an S2ORC {kind} row" if kind else "not an S2ORC row"
        raise RecordError(f"{what}, not a pdf_parses row (import its file on its own)")
    return parse_edges(row["paper_id"], row, line)
