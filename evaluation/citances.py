"""Citing sentences of the ACL data (ScisummNet citances): their author-year markers, the local
context a writer would have typed, and the ACL dev split (citing papers of 2013 and 2014).

Why here, in evaluation: the ACL dev queries are built from these sentences; training
(``training/reranker_data.py``) reads the same sentences for its groups, and must use the very same
split rule so it never trains on dev sentences.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DEV_YEARS = frozenset({2013, 2014})

# A parenthesis holding a year: "(Brants, 2000)", "(2000)", "(e.g., Smith et al., 2019; Doe 2020a)".
_PAREN = re.compile(r"\(([^()]{0,300})\)")
_YEAR = re.compile(r"(?:19|20)\d{2}[a-z]?")
_ONLY_YEARS = re.compile(r"\s*(?:19|20)\d{2}[a-z]?(?:\s*[,;]\s*(?:19|20)\d{2}[a-z]?)*\s*")
# The author part of a narrative citation, matched on a bounded window before "(2000)".
_NARRATIVE = re.compile(
    r"[A-Z][\w'`\-]+(?:\s+(?:et\s+al\.?|and\s+[A-Z][\w'`\-]+|&\s+[A-Z][\w'`\-]+))?(?:'s)?\s*$"
)
_SPACE_PUNCT = re.compile(r"\s+([,.;:)])")
_WS = re.compile(r"\s+")


def acl_year(acl_id: str) -> int | None:
    """Publication year from an Anthology id: ``P13-1001`` -> 2013, ``2020.acl-main.1`` -> 2020."""
    if "." in acl_id and acl_id[:4].isdigit():
        return int(acl_id[:4])
    digits = acl_id[1:3]
    if len(digits) != 2 or not digits.isdigit():
        return None
    yy = int(digits)
    return 1900 + yy if yy >= 60 else 2000 + yy


def is_acl_dev(acl_id: str) -> bool:
    """The ACL dev split: citing papers published in 2013 or 2014."""
    return acl_year(acl_id) in DEV_YEARS


@dataclass
class Marker:
    start: int
    end: int
    text: str  # the whole marker, author names included for narrative ones


def find_markers(sentence: str) -> list[Marker]:
    """Author-year markers: parenthetical ``(Brants, 2000)`` and narrative ``Brants (2000)``."""
    out: list[Marker] = []
    for m in _PAREN.finditer(sentence):
        inner = m.group(1)
        if not _YEAR.search(inner):
            continue
        start = m.start()
        if _ONLY_YEARS.fullmatch(inner):  # narrative: the names precede the parenthesis
            window_start = max(0, start - 80)
            nm = _NARRATIVE.search(sentence[window_start:start])
            if nm:
                start = window_start + nm.start()
        out.append(Marker(start, m.end(), sentence[start : m.end()]))
    return out


def local_context(
    sentence: str, cited_last: str = "", cited_year: int | None = None, placeholder: str = ""
) -> str:
    """The sentence as a writer's local context: the cited paper's marker becomes ``placeholder``
    (the one naming its first author and year, else its year, else the first marker), every other
    marker is removed. Without a marker the placeholder goes at the end."""
    markers = find_markers(sentence)
    target = None
    year = str(cited_year) if cited_year else ""
    last = cited_last.lower()
    for test in (
        lambda mk: last and last in mk.text.lower() and year in mk.text,
        lambda mk: year and year in mk.text,
    ):
        target = next((mk for mk in markers if test(mk)), None)
        if target is not None:
            break
    if target is None and markers:
        target = markers[0]
    parts, pos = [], 0
    for mk in markers:
        parts.append(sentence[pos : mk.start])
        if mk is target and placeholder:
            parts.append(f" {placeholder} ")
        pos = mk.end
    parts.append(sentence[pos:])
    text = _SPACE_PUNCT.sub(r"\1", _WS.sub(" ", "".join(parts))).strip()
    if placeholder and target is None:
        text = text.rstrip(". ") + f" {placeholder}."
    return text


def read_jsonl(path: str | Path) -> Iterator[dict]:
    """Rows of a JSON Lines file (``.xz``-compressed too: the form that travels to a GPU machine)."""
    import lzma

    opener = lzma.open if str(path).endswith(".xz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


@dataclass
class Citance:
    citing: str
    text: str
    cited: list[str]


def load_citances(path: str | Path, *, dev: bool = False) -> list[Citance]:
    """ScisummNet sentences grouped by (citing paper, text): the training split, or with
    ``dev=True`` only the ACL dev split (citing papers of 2013 and 2014)."""
    groups: dict[tuple[str, str], Citance] = {}
    for row in read_jsonl(path):
        if is_acl_dev(row["citing"]) != dev:
            continue
        key = (row["citing"], row["text"])
        if key not in groups:
            groups[key] = Citance(row["citing"], row["text"], [])
        if row["cited"] not in groups[key].cited:
            groups[key].cited.append(row["cited"])
    return list(groups.values())
