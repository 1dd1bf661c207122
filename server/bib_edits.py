"""Edits inside one ``.bib`` entry, as plain ``(start, end, new_text)`` offsets into the ``.bib``
text (no LSP types): replace the whole entry, or set some fields' values and leave every other
byte as it was (the user's spacing, comments, field order, line endings).

Why a small parser of its own: the importer (:mod:`citewise.indexer.bibtex`) reads values, not
where they stand; a fix must touch only the value it changes (``year = 2019``, ``title =
"{BERT} for {IR}"``, ``author = {A and B} # x``), and insert a missing field in the entry's own
style (its indent, its line ending, with or without a comma after the last field).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

TextEdit = tuple[int, int, str]  # (start, end, new text): offsets into the .bib text

_NAME = re.compile(r"[A-Za-z_][\w\-:.+/]*")
_BARE = re.compile(r"[^\s,#{}()\"=]+")


@dataclass(frozen=True)
class FieldSpan:
    """One field of an entry: ``text[name_start:value_end]`` is ``name = value``."""

    name: str  # lower case
    name_start: int
    value_start: int
    value_end: int


@dataclass(frozen=True)
class EntryLayout:
    """Where an entry's parts are: its fields, and the offset of its closing delimiter."""

    fields: list[FieldSpan]
    key_end: int  # just after the key (before its comma, when there is one)
    close: int  # offset of the closing ``}`` / ``)``
    comma_after_last: int | None  # offset of a comma after the last field (or after the key), if any


def newline_of(text: str) -> str:
    """The line ending the text uses (``\\r\\n`` when it has one, else ``\\n``)."""
    return "\r\n" if "\r\n" in text else "\n"


def _skip_ws(text: str, i: int, end: int) -> int:
    while i < end and text[i].isspace():
        i += 1
    return i


def _braced_end(text: str, i: int, end: int) -> int | None:
    """Offset just after the ``}`` matching the ``{`` at ``i`` (None: unbalanced before ``end``)."""
    depth = 0
    for j in range(i, end):
        ch = text[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return None


def _quoted_end(text: str, i: int, end: int) -> int | None:
    """Offset just after the ``"`` closing the one at ``i`` (a ``"`` inside braces does not close)."""
    depth = 0
    for j in range(i + 1, end):
        ch = text[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == '"' and depth <= 0:
            return j + 1
    return None


def _value_end(text: str, i: int, end: int) -> int | None:
    """Offset just after a field value starting at ``i``: parts (braced, quoted, bare) joined by ``#``."""
    while True:
        if i >= end:
            return None
        ch = text[i]
        if ch == "{":
            j = _braced_end(text, i, end)
        elif ch == '"':
            j = _quoted_end(text, i, end)
        else:
            m = _BARE.match(text, i, end)
            j = m.end() if m else None
        if j is None:
            return None
        k = _skip_ws(text, j, end)
        if k < end and text[k] == "#":
            i = _skip_ws(text, k + 1, end)
            continue
        return j


def layout(text: str, start: int, end: int) -> EntryLayout | None:
    """The fields of the entry ``text[start:end]`` (``@type{key, ...}``); None when it cannot be read."""
    m = re.compile(r"@\s*[A-Za-z]+\s*([{(])").match(text, start, end)
    if m is None:
        return None
    closer = "}" if m.group(1) == "{" else ")"
    close = end - 1
    while close > m.end() and text[close].isspace():
        close -= 1
    if text[close] != closer:
        return None
    i = _skip_ws(text, m.end(), close)
    key = re.compile(r"[^,\s]*").match(text, i, close)
    key_end = key.end() if key else i
    i = _skip_ws(text, key_end, close)
    fields: list[FieldSpan] = []
    comma: int | None = None
    if i < close and text[i] == ",":
        comma = i
        i += 1
    elif i < close:
        return None
    while True:
        i = _skip_ws(text, i, close)
        if i >= close:
            break
        name = _NAME.match(text, i, close)
        if name is None:
            return None
        j = _skip_ws(text, name.end(), close)
        if j >= close or text[j] != "=":
            return None
        v = _skip_ws(text, j + 1, close)
        v_end = _value_end(text, v, close)
        if v_end is None:
            return None
        fields.append(FieldSpan(name.group().lower(), i, v, v_end))
        i = _skip_ws(text, v_end, close)
        comma = None
        if i < close and text[i] == ",":
            comma = i
            i += 1
        elif i < close:
            return None
    return EntryLayout(fields, key_end, close, comma)


def replace_entry(text: str, start: int, end: int, entry: str) -> TextEdit:
    """The edit replacing ``text[start:end]`` (one whole entry) by ``entry``, in the text's line
    endings; what follows the entry (its newline, the next entry) stays."""
    new = entry.strip("\r\n").replace("\r\n", "\n")
    return (start, end, new.replace("\n", newline_of(text)))


def update_fields(text: str, start: int, end: int, values: Iterable[tuple[str, str]]) -> list[TextEdit]:
    """Edits setting each ``(field, TeX value)`` of the entry ``text[start:end]``: a field present
    gets its value replaced (every occurrence, should it be there twice), a missing one is added
    before the closing brace in the entry's style. The edits do not overlap and are in text order;
    [] when the entry cannot be read (nothing is better than a wrong edit)."""
    lay = layout(text, start, end)
    if lay is None:
        return []
    edits: list[TextEdit] = []
    missing: list[tuple[str, str]] = []
    for name, value in values:
        spans = [f for f in lay.fields if f.name == name.lower()]
        if not spans:
            missing.append((name, value))
        for f in spans:
            if text[f.value_start : f.value_end] != value:
                edits.append((f.value_start, f.value_end, value))
    if missing:
        edits.append(_insertion(text, start, lay, missing))
    return _merged(sorted(edits))


def _insertion(text: str, start: int, lay: EntryLayout, missing: list[tuple[str, str]]) -> TextEdit:
    """One insertion adding ``missing`` fields after the last field (or the key)."""
    nl = newline_of(text[start : lay.close + 1])
    last = lay.fields[-1] if lay.fields else None
    if last is not None:
        line_start = (
            max(text.rfind("\n", start, last.name_start), text.rfind("\r", start, last.name_start)) + 1
        )
        head = text[line_start : last.name_start]
        sep = nl + head if line_start > start and not head.strip() else " "
        eq = text[last.name_start : last.value_start][len(last.name) :]  # " = " as the entry writes it
        eq = eq if eq.strip() == "=" else " = "
    else:
        sep, eq = nl + "  ", " = "
    lines = [f"{name}{eq}{value}" for name, value in missing]
    if lay.comma_after_last is not None:
        # "last = {x},|" -> "last = {x},\n  new = {y},": the entry's trailing comma is kept.
        return (lay.comma_after_last + 1, lay.comma_after_last + 1, "".join(f"{sep}{x}," for x in lines))
    at = last.value_end if last is not None else lay.key_end
    return (at, at, "".join(f",{sep}{x}" for x in lines))


def _merged(edits: list[TextEdit]) -> list[TextEdit]:
    """Touching edits joined into one (an insertion at a replaced value's end), so the edits of one
    workspace edit never share a position (clients may apply those in either order)."""
    out: list[TextEdit] = []
    for s, e, t in edits:
        if out and s <= out[-1][1]:
            ps, pe, pt = out[-1]
            out[-1] = (ps, max(pe, e), pt + t)
        else:
            out.append((s, e, t))
    return out


def apply(text: str, edits: Iterable[TextEdit]) -> str:
    """``text`` with non-overlapping ``edits`` applied (from the last, so offsets hold)."""
    for s, e, t in sorted(edits, reverse=True):
        text = text[:s] + t + text[e:]
    return text
