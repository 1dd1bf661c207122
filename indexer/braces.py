"""TeX brace matching, the one implementation for drafts, ``.bib`` texts and the importer.

Why one pass over the whole text: matching each ``{`` by scanning forward is quadratic when a
half-typed draft holds many unclosed groups (``\\input{`` repeated, an unclosed ``\\cite{``
before every paragraph); a single stack pass pairs every brace in linear time, and later
look-ups are a dictionary access.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# An escape pair is one token, so "\\{" never opens a group; one finditer pass is linear.
_SPECIAL_RE = re.compile(r"\\.|[{}]", re.DOTALL)


def pair_braces(text: str, start: int = 0, end: int | None = None) -> dict[int, int]:
    """``{`` offset -> matching ``}`` offset for every closed group of ``text[start:end]``.

    A backslash escapes the next character (``\\{`` and ``\\}`` are not group braces);
    unmatched braces are left out.
    """
    stop = len(text) if end is None else min(end, len(text))
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for m in _SPECIAL_RE.finditer(text, start, stop):
        ch = m.group()
        if ch == "{":
            stack.append(m.start())
        elif ch == "}" and stack:
            pairs[stack.pop()] = m.start()
    return pairs


@dataclass
class BraceIndex:
    """Lazily built :func:`pair_braces` of one text, for repeated ``closing`` look-ups."""

    text: str
    _pairs: dict[int, int] | None = field(default=None, repr=False)

    def closing(self, open_pos: int, limit: int | None = None) -> int | None:
        """Offset of the ``}`` matching the ``{`` at ``open_pos``; None when unclosed (or further
        than ``limit`` characters away)."""
        if self._pairs is None:
            self._pairs = pair_braces(self.text)
        close = self._pairs.get(open_pos)
        if close is None or (limit is not None and close - open_pos > limit):
            return None
        return close


def closing_brace(text: str, open_pos: int, limit: int = 20000) -> int | None:
    """The ``}`` matching the ``{`` at ``open_pos``, looking at most ``limit`` characters ahead.

    For a single look-up: the scan stops at the match, so its cost is the group's length.
    Use :class:`BraceIndex` for many look-ups in one text.
    """
    depth = 0
    for m in _SPECIAL_RE.finditer(text, open_pos, min(len(text), open_pos + limit)):
        ch = m.group()
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return m.start()
    return None
