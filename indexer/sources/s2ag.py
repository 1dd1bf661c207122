"""Semantic Scholar: the Academic Graph's bulk datasets (``papers``, ``abstracts``, ``citations``)
and Graph API JSON, as they are published.

- ``papers`` rows are paper records (no abstract: S2AG ships abstracts as a dataset of their own).
- ``abstracts`` rows are kept by corpus id (``source_abstracts``) and given to the paper with that
  corpus id whenever both are in the store, whichever came first (indexer/sources/abstracts.py).
- ``citations`` rows are edges between corpus ids (``citation_edges``); each of ``contexts`` is a
  citing sentence of the cited paper, with its ``intents`` and the row's ``isinfluential``. Two
  release shapes: early releases give ``intents`` as one list for the row, later ones one list per
  context (and add ``citationid``); both are read.
- Graph API JSON: a paper (``paperId``...) with its embedded ``citations`` / ``references``, a
  list of papers (batch, search ``data``), or a ``/citations`` or ``/references`` page whose
  ``data[]`` items hold a ``citingPaper`` / ``citedPaper`` with ``contexts``. Such a page does not
  name the paper it belongs to, so its edges need the file name to (``CorpusId_123...json``, or the
  40-hex paperId); without one its papers import and the edges are reported as not imported.

Field names are matched case-insensitively: the datasets write ``externalids`` / ``corpusid``,
the API ``externalIds`` / ``corpusId``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..citations import CitationEdge
from ..jsonl import RecordError
from ..records import ImportProblem, PaperRecord
from .ids import PaperIds, scheme_ref
from .stream import iter_converted, iter_json
from .text import clean as clean_text

PAPERS, ABSTRACTS, CITATIONS, API = "s2ag-papers", "s2ag-abstracts", "s2ag-citations", "s2-api"
# The other S2AG datasets, by a field only they have, for "a dump of the wrong kind" messages.
OTHER_DATASETS = (
    ("authorid", "authors (author records)"),
    ("sha", "paper-ids (paper sha -> corpus id)"),
    ("vector", "embeddings (SPECTER vectors)"),
    ("model", "tldrs (one-sentence summaries)"),
    ("content", "s2orc (full text)"),
    ("alternate_names", "publication-venues (venue records)"),
)
_TYPES = {
    "conference": "inproceedings",
    "journalarticle": "article",
    "review": "article",
    "book": "book",
    "booksection": "incollection",
    "dataset": "misc",
    "editorial": "article",
    "lettersandcomments": "article",
}
_ANCHOR_CORPUS = re.compile(r"corpus[-_ ]?id[-_:=]?(\d{1,12})", re.I)
_ANCHOR_SHA = re.compile(r"(?<![0-9a-f])([0-9a-f]{40})(?![0-9a-f])")
_YEAR = re.compile(r"(\d{4})")
# Why rows are skipped, in the import summary's words (counted by them): not errors, rows that
# cannot become what citewise stores.
NO_ABSTRACT_SKIP = "rows without an abstract"
NO_CORPUS_ID_SKIP = "rows whose cited paper has no corpus id (not in Semantic Scholar's corpus)"
NO_ID_SKIP = "papers without any id"


def _low(obj: dict[str, Any]) -> dict[str, Any]:
    return {str(k).lower(): v for k, v in obj.items()}


def dataset_kind(obj: Any) -> str:
    """Which S2 format one decoded record is: a format name of this module, ``"other:<what>"``
    for another S2AG dataset, or ``""`` when it is none of them."""
    if isinstance(obj, list):
        return API if any(isinstance(x, dict) and _is_api_paper(_low(x)) for x in obj[:5]) else ""
    if not isinstance(obj, dict):
        return ""
    low = _low(obj)
    if "citingcorpusid" in low:
        return CITATIONS
    if "corpusid" in low and "title" in low and "externalids" in low and "paperid" not in low:
        return PAPERS
    if "corpusid" in low and "abstract" in low and "title" not in low:
        return ABSTRACTS
    if isinstance(low.get("data"), list) or "citingpaper" in low or "citedpaper" in low or _is_api_paper(low):
        return API
    for field, what in OTHER_DATASETS:
        if field in low:
            return f"other:{what}"
    return ""


def _is_api_paper(low: dict[str, Any]) -> bool:
    return "paperid" in low and any(k in low for k in ("title", "corpusid", "externalids"))


# -- papers ----------------------------------------------------------------------------------------
def _ids(low: dict[str, Any]) -> PaperIds:
    ids = PaperIds()
    ext = _low(low["externalids"]) if isinstance(low.get("externalids"), dict) else {}
    ids.add("corpusid", low.get("corpusid") or ext.get("corpusid"))
    ids.add("s2", low.get("paperid"))
    ids.add("doi", ext.get("doi"))
    ids.add("arxiv", ext.get("arxiv"))
    ids.add("acl", ext.get("acl"))
    for scheme, name in (("mag", "mag"), ("pmid", "pubmed"), ("pmcid", "pubmedcentral"), ("dblp", "dblp")):
        ids.add(scheme, ext.get(name))
    return ids


def _authors(low: dict[str, Any]) -> list[str]:
    value = low.get("authors")
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(f"'authors' must be a list, not {type(value).__name__}")
    return [clean_text(a["name"]) for a in value if isinstance(a, dict) and isinstance(a.get("name"), str)]


def _year(low: dict[str, Any]) -> int | None:
    year = low.get("year")
    if isinstance(year, int) and not isinstance(year, bool) and -9999 <= year <= 9999:
        return year
    date = low.get("publicationdate")
    m = _YEAR.match(date) if isinstance(date, str) else None
    return int(m.group(1)) if m else None


def _object(value: Any) -> dict[str, Any]:
    """A JSON object field, or an empty one where the dump has null or another type."""
    return value if isinstance(value, dict) else {}


def _venue_and_extra(low: dict[str, Any]) -> tuple[str, dict[str, str]]:
    journal = _object(low.get("journal"))
    pub_venue = _object(low.get("publicationvenue"))
    venue = ""
    for value in (low.get("venue"), journal.get("name"), pub_venue.get("name")):
        if isinstance(value, str) and value.strip():
            venue = clean_text(value)
            break
    extra = {
        name: clean_text(str(journal[name]))
        for name in ("volume", "pages")
        if isinstance(journal.get(name), (str, int)) and str(journal[name]).strip()
    }
    if "pages" in extra:
        extra["pages"] = re.sub(r"\s*-+\s*", "--", extra["pages"], count=1)
    return venue, extra


def _entry_type(low: dict[str, Any]) -> str:
    types = [t.lower() for t in low.get("publicationtypes") or [] if isinstance(t, str)]
    for wanted in ("conference", "booksection", "book", "journalarticle"):
        if wanted in types:
            return _TYPES[wanted]
    return _TYPES.get(types[0], "misc") if types else "article"


def _subjects(low: dict[str, Any]) -> list[str]:
    """What ``--field`` matches: ``s2fieldsofstudy[].category`` and ``fieldsofstudy``."""
    names = [f.get("category") for f in low.get("s2fieldsofstudy") or [] if isinstance(f, dict)]
    names += list(low.get("fieldsofstudy") or [])
    return list(dict.fromkeys(n for n in names if isinstance(n, str) and n))


def record_from_paper(obj: Any, source: str, line: int) -> PaperRecord:
    """One S2AG ``papers`` row or Graph API paper as a record (raises :class:`RecordError`)."""
    if not isinstance(obj, dict):
        raise RecordError(f"expected a paper object, got {type(obj).__name__}")
    low = _low(obj)
    title = clean_text(low["title"]) if isinstance(low.get("title"), str) else ""
    if not title:
        raise RecordError("no title")
    ids = _ids(low)
    if not ids.refs and not ids.doi:
        raise RecordError("no corpus id or paper id")
    venue, extra = _venue_and_extra(low)
    abstract = low.get("abstract")
    return PaperRecord(
        title=title,
        abstract=clean_text(abstract) if isinstance(abstract, str) else "",
        authors=_authors(low),
        year=_year(low),
        venue=venue,
        entry_type=_entry_type(low),
        key=ids.refs[0] if ids.refs else "",
        doi=ids.doi,
        arxiv=ids.arxiv,
        acl_id=ids.acl,
        source=source,
        source_line=line,
        extra=extra,
        ids=ids.refs,
        subjects=_subjects(low),
    )


def iter_papers(path: str | Path) -> Iterator[PaperRecord | ImportProblem]:
    """The records of an S2AG ``papers`` file, streaming; a bad row is reported and skipped."""
    return iter_converted(path, _paper_row)


def _paper_row(obj: Any, source: str, line: int) -> list[PaperRecord]:
    kind = dataset_kind(obj)
    if kind.startswith("other:"):
        raise RecordError(f"an S2AG {kind[6:]} row, not a paper")
    return [record_from_paper(obj, source, line)]


# -- abstracts -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AbstractRow:
    """One abstract of the ``abstracts`` dataset: the paper's ref, the text, where it is."""

    ref: str
    abstract: str
    line: int


def iter_abstracts(path: str | Path) -> Iterator[AbstractRow | ImportProblem]:
    """The abstracts of an S2AG ``abstracts`` file, by corpus id ref, streaming."""
    source = str(path)
    for item in iter_json(Path(path)):
        if isinstance(item, ImportProblem):
            yield item
            continue
        line, obj = item
        low = _low(obj) if isinstance(obj, dict) else {}
        ref = scheme_ref("corpusid", low.get("corpusid"))
        text = low.get("abstract")
        if not ref:
            yield ImportProblem(source, line, "an abstract row needs a numeric 'corpusid'")
        elif text is None or (isinstance(text, str) and not text.strip()):
            yield ImportProblem(source, line, "no abstract", skipped=True, reason=NO_ABSTRACT_SKIP)
        elif not isinstance(text, str):
            yield ImportProblem(source, line, f"'abstract' must be a string, not {type(text).__name__}")
        else:
            yield AbstractRow(ref, clean_text(text), line)


# -- citations -------------------------------------------------------------------------------------
def _intents(value: Any, n_contexts: int) -> list[str]:
    """Intents for each of ``n_contexts`` sentences (at least one slot), comma-joined: from one
    list per context (later releases) or one list for the whole row (early ones: every context
    gets it)."""
    n = max(n_contexts, 1)
    if not isinstance(value, list) or not value:
        return [""] * n
    if all(isinstance(v, list) or v is None for v in value):
        per = [",".join(i for i in (v or []) if isinstance(i, str)) for v in value]
        return (per + [""] * n)[:n]
    return [",".join(v for v in value if isinstance(v, str))] * n


def edges_from_row(obj: Any, line: int) -> list[CitationEdge]:
    """The edges of one ``citations`` row: one per context, or one without a sentence; raises
    :class:`RecordError` for a malformed row, ``LookupError`` when the cited paper has no id."""
    if not isinstance(obj, dict):
        raise RecordError(f"expected a citation object, got {type(obj).__name__}")
    low = _low(obj)
    citing = scheme_ref("corpusid", low.get("citingcorpusid"))
    if not citing:
        raise RecordError("'citingcorpusid' must be a corpus id")
    if low.get("citedcorpusid") is None:
        raise LookupError("the cited paper has no corpus id (not in Semantic Scholar's corpus)")
    cited = scheme_ref("corpusid", low.get("citedcorpusid"))
    if not cited:
        raise RecordError("'citedcorpusid' must be a corpus id")
    contexts = low.get("contexts") or []
    if not isinstance(contexts, list):
        raise RecordError(f"'contexts' must be a list of sentences, not {type(contexts).__name__}")
    influential = low.get("isinfluential")
    influential = influential if isinstance(influential, bool) else None
    texts = [clean_text(c) if isinstance(c, str) else "" for c in contexts]
    intents = _intents(low.get("intents"), len(texts))
    edges = [CitationEdge(citing, cited, t, line, intents[i], influential) for i, t in enumerate(texts) if t]
    return edges or [CitationEdge(citing, cited, "", line, intents[0], influential)]


def iter_citations(path: str | Path) -> Iterator[CitationEdge | ImportProblem]:
    """The edges of an S2AG ``citations`` file, streaming; bad rows reported, rows whose cited
    paper has no corpus id skipped (counted: they cannot become edges)."""
    source = str(path)
    for item in iter_json(Path(path)):
        if isinstance(item, ImportProblem):
            yield item
            continue
        line, obj = item
        try:
            yield from edges_from_row(obj, line)
        except RecordError as exc:
            yield ImportProblem(source, line, str(exc))
        except LookupError as exc:
            yield ImportProblem(source, line, str(exc), skipped=True, reason=NO_CORPUS_ID_SKIP)


# -- Graph API -------------------------------------------------------------------------------------
def anchor_from_name(path: Path) -> str:
    """The paper a ``/citations`` or ``/references`` page belongs to, from its file name."""
    if m := _ANCHOR_CORPUS.search(path.name):
        return scheme_ref("corpusid", m.group(1))
    if m := _ANCHOR_SHA.search(path.name.lower()):
        return scheme_ref("s2", m.group(1))
    return ""


def _paper_ref(low: dict[str, Any]) -> str:
    ids = _ids(low)
    return ids.refs[0] if ids.refs else ids.doi or ids.arxiv or ids.acl


def _api_item(item: Any, anchor: str, source: str, line: int) -> Iterator[Any]:
    """A ``data[]`` item: the paper it holds (if titled) and its edges to or from ``anchor``."""
    low = _low(item) if isinstance(item, dict) else {}
    for role in ("citingpaper", "citedpaper"):
        if isinstance(low.get(role), dict):
            paper = _low(low[role])
            break
    else:
        yield from _api_paper(item, source, line)
        return
    ref = _paper_ref(paper)
    if not ref:  # an unresolved reference (S2 could not match it to a paper): nothing to name it by
        yield ImportProblem(source, line, "a paper without any id", skipped=True, reason=NO_ID_SKIP)
        return
    if isinstance(paper.get("title"), str) and paper["title"].strip():
        yield record_from_paper(low[role], source, line)
    if not anchor:
        return
    citing, cited = (ref, anchor) if role == "citingpaper" else (anchor, ref)
    contexts = [clean_text(c) for c in low.get("contexts") or [] if isinstance(c, str) and c.strip()]
    with_intent = {
        clean_text(c["context"]): ",".join(i for i in c.get("intents") or [] if isinstance(i, str))
        for c in low.get("contextswithintent") or []
        if isinstance(c, dict) and isinstance(c.get("context"), str)
    }
    influential = low.get("isinfluential") if isinstance(low.get("isinfluential"), bool) else None
    for text in contexts or [""]:
        yield CitationEdge(citing, cited, text, line, with_intent.get(text, ""), influential)


def _api_paper(obj: Any, source: str, line: int) -> Iterator[Any]:
    """A Graph API paper, its embedded citing and cited papers, and the edges between them."""
    rec = record_from_paper(obj, source, line)
    low = _low(obj)
    own = _paper_ref(low)
    for role in ("citations", "references"):
        for other in low.get(role) or []:
            if not isinstance(other, dict):
                continue
            ref = _paper_ref(_low(other))
            if not ref:
                continue
            if isinstance(other.get("title"), str) and other["title"].strip():
                yield record_from_paper(other, source, line)
            if role == "references":
                rec.references.append(ref)
            else:
                yield CitationEdge(ref, own, "", line)
    yield rec


class _Unanchored:
    """A page's edge item met without the paper the page belongs to (counted, then reported)."""


def api_items(
    value: Any, anchor: str, source: str, line: int = 1, numbered: bool = False
) -> Iterator[PaperRecord | CitationEdge | ImportProblem | _Unanchored]:
    """Papers and edges of one decoded Graph API answer (a paper, a list of papers, or a page
    whose ``data[]`` holds papers or citation items); ``anchor`` is the paper a ``/citations`` or
    ``/references`` page belongs to. ``numbered``: the items are ``line``, ``line + 1``... (the
    edges' ``line``: ``citewise fetch`` numbers a page's items from its offset), else all ``line``
    (a file's line)."""
    items = value.get("data") if isinstance(value, dict) and isinstance(value.get("data"), list) else None
    if items is None:
        items = value if isinstance(value, list) else [value]
    for i, entry in enumerate(items):
        at = line + i if numbered else line
        try:
            yield from _api_item(entry, anchor, source, at)
        except RecordError as exc:
            yield ImportProblem(source, at, f"data[{i}]: {exc}" if len(items) > 1 else str(exc))
        low = _low(entry) if isinstance(entry, dict) else {}
        if not anchor and ("citingpaper" in low or "citedpaper" in low):
            yield _Unanchored()


def iter_api(path: str | Path) -> Iterator[PaperRecord | CitationEdge | ImportProblem]:
    """Papers and edges of a Graph API response; edges of a page need :func:`anchor_from_name`."""
    path = Path(path)
    source, anchor = str(path), anchor_from_name(path)
    missing_anchor = 0
    for item in iter_json(path):
        if isinstance(item, ImportProblem):
            yield item
            continue
        line, value = item
        for out in api_items(value, anchor, source, line):
            if isinstance(out, _Unanchored):
                missing_anchor += 1
            else:
                yield out
    if missing_anchor:
        yield ImportProblem(
            source,
            1,
            f"edges and citing sentences of {missing_anchor} citation(s) not imported: a /citations or "
            "/references response does not name the paper it is about; put its id in the file name "
            "(e.g. CorpusId_215416146.citations.json) and import it again (its papers were imported)",
        )
