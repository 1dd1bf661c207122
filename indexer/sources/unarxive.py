"""unarXive full text (JSON Lines, one arXiv paper a line): the paper's own metadata, and every
sentence of its body that cites a bibliography entry as a citing sentence of the paper that entry
resolves to.

A line has ``metadata`` (an arXiv snapshot record: indexer/sources/arxiv.py reads it),
``body_text`` paragraphs whose ``text`` marks citations ``{{cite:<ref_id>}}`` at ``cite_spans``
(``start``/``end``/``ref_id``), and ``bib_entries[ref_id].ids`` (``open_alex_id``, ``doi``,
``arxiv_id``, ``pubmed_id``; empty strings where unknown).

Why one id per cited paper, arXiv id first, then DOI, OpenAlex, PubMed: an edge names its cited
paper by one ref, and the papers of an arXiv-centred store (the arXiv snapshot, OpenAlex, S2AG)
answer to the arXiv id whenever they have one; a paper stored under a DOI or a W id alone is still
reached through the next ids when the entry has no arXiv id. The sentence is cut at the nearest
full stops around the citation (at most ``_MAX_SENTENCE`` characters), with the other citation,
formula and figure markers taken out.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..citations import CitationEdge
from ..jsonl import RecordError
from ..records import ImportProblem, PaperRecord
from . import arxiv
from .ids import arxiv_id, scheme_ref, split_doi
from .stream import iter_converted
from .text import clean

FORMAT = "unarxive"
_MARKER = re.compile(r"\{\{(?:cite|formula|figure|table|ref):[^{}\s]{1,100}\}\}")
_BOUNDARY = re.compile(r"[.?!](?=\s)")
# A marker cut in two where a sentence was too long to keep whole.
_CUT_MARKER = re.compile(r"^\S{0,120}\}\}|\{\{\S{0,120}$")
_MAX_SENTENCE = 600


def is_paper(obj: Any) -> bool:
    """Whether ``obj`` is an unarXive paper: arXiv metadata, body text and bibliography."""
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("metadata"), dict)
        and isinstance(obj.get("body_text"), list)
        and isinstance(obj.get("bib_entries"), dict)
    )


def entry_ref(entry: Any) -> str:
    """The ref a bibliography entry names its paper by (``""`` when it has no id)."""
    ids = entry.get("ids") if isinstance(entry, dict) else None
    if not isinstance(ids, dict):
        return ""
    doi, doi_arxiv = split_doi(ids.get("doi") or "")
    return (
        arxiv_id(ids.get("arxiv_id") or "")
        or doi_arxiv
        or doi
        or scheme_ref("openalex", ids.get("open_alex_id"))
        or scheme_ref("pmid", ids.get("pubmed_id"))
    )


def sentence_at(text: str, stops: list[int], start: int, end: int) -> str:
    """The sentence of ``text`` around ``[start, end)`` (``stops``: the ends of its sentences),
    markers out, whitespace collapsed."""
    i = bisect.bisect_right(stops, start)
    begin = stops[i - 1] if i else 0
    j = bisect.bisect_left(stops, end)
    stop = stops[j] if j < len(stops) else len(text)
    begin, stop = max(begin, start - _MAX_SENTENCE // 2), min(stop, end + _MAX_SENTENCE // 2)
    return clean(_CUT_MARKER.sub(" ", _MARKER.sub(" ", text[begin:stop])))


def sentence_stops(text: str, spans: list[dict[str, Any]]) -> list[int]:
    """The ends of the sentences of ``text``: after ``.``, ``?`` or ``!`` and a space, except
    inside a citation span (S2ORC keeps the citation as written: ``(Smith et al. 2005a)``)."""
    stops = [m.end() for m in _BOUNDARY.finditer(text)]
    ranges = [
        (s["start"], s["end"])
        for s in spans
        if isinstance(s.get("start"), int) and isinstance(s.get("end"), int)
    ]
    if not ranges or not stops:
        return stops
    return [stop for stop in stops if not any(start < stop <= end for start, end in ranges)]


def citing_sentences(paragraphs: Any, citing: str, refs: dict[str, str], line: int) -> Iterator[CitationEdge]:
    """One edge per distinct (cited paper, sentence) of the citation spans of ``paragraphs``
    (``text`` and ``cite_spans`` with ``start``, ``end`` and ``ref_id``; ``refs``: ref_id -> the
    cited paper's ref): unarXive's and S2ORC's full text, which share this shape."""
    seen: set[tuple[str, str]] = set()
    for para in paragraphs if isinstance(paragraphs, list) else []:
        if not isinstance(para, dict) or not isinstance(para.get("text"), str):
            continue
        text = para["text"]
        given = para.get("cite_spans")
        spans = [span for span in given if isinstance(span, dict)] if isinstance(given, list) else []
        stops = sentence_stops(text, spans)
        for span in spans:
            ref_id = span.get("ref_id")
            cited = refs.get(ref_id) if isinstance(ref_id, str) else None  # a list: no entry, no crash
            start, end = span.get("start"), span.get("end")
            if not cited or not isinstance(start, int) or not isinstance(end, int):
                continue
            sentence = sentence_at(text, stops, start, end)
            if sentence and (cited, sentence) not in seen:
                seen.add((cited, sentence))
                yield CitationEdge(citing, cited, sentence, line)


def items_from_paper(paper: Any, source: str, line: int) -> Iterator[PaperRecord | CitationEdge]:
    """The citing paper's record (its references: every bibliography entry with an id) and one
    edge per distinct (cited paper, sentence); raises :class:`RecordError`."""
    if not is_paper(paper):
        raise RecordError("not an unarXive paper (needs 'metadata', 'body_text' and 'bib_entries')")
    record = arxiv.record_from_line(paper["metadata"], source, line)
    refs = {key: ref for key, entry in paper["bib_entries"].items() if (ref := entry_ref(entry))}
    record.references = list(dict.fromkeys(refs.values()))
    yield record
    yield from citing_sentences(paper["body_text"], record.arxiv, refs, line)


def iter_unarxive(path: str | Path) -> Iterator[PaperRecord | CitationEdge | ImportProblem]:
    """Papers and citing sentences of an unarXive file, streaming; a bad paper is reported."""
    return iter_converted(path, items_from_paper)
