"""YAML front matter of a Markdown draft: where the block is, and a small reader for its top level.

Split from :mod:`citewise.server.markdown` (which re-exports it) because it is a reader of its
own: the Markdown scanner needs only :func:`front_matter_span` to skip the block and
:func:`front_matter` for title, abstract and bibliography.
"""

from __future__ import annotations

import re

_FM_OPEN_RE = re.compile(r"\A\ufeff?---[ \t]*\r?\n(?![ \t]*\r?\n)")
_FM_CLOSE_RE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$", re.MULTILINE)


def front_matter_span(text: str) -> tuple[int, int, int] | None:
    """``(body_start, body_end, block_end)`` of a leading YAML block, or ``None``."""
    m = _FM_OPEN_RE.match(text)
    if not m:
        return None
    c = _FM_CLOSE_RE.search(text, m.end())
    if not c:
        return None
    end = c.end()
    if text.startswith("\n", end):
        end += 1
    return m.end(), c.start(), end


# --------------------------------------------------------------------------------------------
# YAML front matter (a minimal reader: top-level scalars, block scalars and lists)
# --------------------------------------------------------------------------------------------

YamlValue = str | list[str] | None

# The value runs to the end of the line and is stripped by the caller: a lazy ``(.*?)`` before
# ``[ \t]*$`` would rescan the trailing blanks at every step (quadratic on a line of spaces).
_YAML_KEY_RE = re.compile(r"""(?:"([^"\n]+)"|'([^'\n]+)'|([A-Za-z_][\w.-]*))[ \t]*:(?:[ \t]+(.*))?$""")
_BLOCK_HEADER_RE = re.compile(r"([|>])([+-]?[1-9]?|[1-9][+-])[ \t]*(?:#.*)?$")
_YAML_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/", "r": "", "0": "", " ": " "}


def _strip_comment(s: str) -> str:
    i = s.find(" #")
    return s[:i].rstrip() if i >= 0 else s


def _unquote(s: str) -> str:
    """A scalar that may be quoted; multi-line quoted content is already joined."""
    s = s.strip()
    if s.startswith('"'):
        out = []
        i = 1
        while i < len(s):
            ch = s[i]
            if ch == "\\" and i + 1 < len(s):
                out.append(_YAML_ESCAPES.get(s[i + 1], s[i + 1]))
                i += 2
                continue
            if ch == '"':
                break
            out.append(ch)
            i += 1
        return "".join(out)
    if s.startswith("'"):
        out = []
        i = 1
        while i < len(s):
            if s[i] == "'":
                if s.startswith("'", i + 1):
                    out.append("'")
                    i += 2
                    continue
                break
            out.append(s[i])
            i += 1
        return "".join(out)
    return _strip_comment(s)


def _block_scalar(style: str, block: list[str]) -> str:
    nonblank = [ln for ln in block if ln.strip()]
    if not nonblank:
        return ""
    indent = len(nonblank[0]) - len(nonblank[0].lstrip(" \t"))
    lines = [ln[indent:] if ln.strip() else "" for ln in block]
    while lines and not lines[-1]:
        lines.pop()
    if style == "|":
        return "\n".join(lines)
    paragraphs: list[list[str]] = [[]]
    for ln in lines:
        if ln:
            paragraphs[-1].append(ln)
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n".join(" ".join(p) for p in paragraphs if p)


def _yaml_value(rest: str, block: list[str]) -> YamlValue:
    if rest and rest[0] in "|>":
        header = _BLOCK_HEADER_RE.match(rest)
        if header:
            return _block_scalar(rest[0], block)
    if rest.startswith(("'", '"')):
        joined = " ".join([rest, *(ln.strip() for ln in block if ln.strip())])
        return _unquote(joined)
    if rest.startswith("["):
        joined = " ".join([rest, *(ln.strip() for ln in block)])
        inner = joined[1 : joined.rfind("]")] if "]" in joined else joined[1:]
        return [v for v in (_unquote(p) for p in inner.split(",")) if v]
    if rest.startswith("{") or rest.startswith(("&", "*", "!")):
        return None  # flow mappings, anchors, tags: not needed for title/abstract/bibliography
    if not rest:
        lines = [ln.strip() for ln in block if ln.strip() and not ln.strip().startswith("#")]
        if not lines:
            return None
        if lines[0].startswith("-"):
            items: list[str] = []
            for ln in lines:
                if ln == "-" or ln.startswith("- "):
                    items.append(ln[1:].strip())
                elif items:
                    items[-1] = f"{items[-1]} {ln}"
            return [v for v in (_unquote(i) for i in items) if v]
        if _YAML_KEY_RE.match(lines[0]):
            return None  # a nested mapping
        return " ".join(_strip_comment(ln) for ln in lines)
    return " ".join([_strip_comment(rest), *(_strip_comment(ln.strip()) for ln in block if ln.strip())])


def parse_front_matter(body: str) -> dict[str, YamlValue]:
    """Top-level ``key: value`` pairs of a YAML block.

    A deliberately small reader (PyYAML is not a dependency): plain, quoted and multi-line
    scalars, ``|``/``>`` block scalars, block and flow lists. Nested mappings read as ``None``.
    A malformed block yields what could be read; it never raises.
    """
    lines = body.splitlines()
    out: dict[str, YamlValue] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        m = None if not line or line[0] in " \t#" else _YAML_KEY_RE.match(line)
        i += 1
        if m is None:
            continue
        key = m.group(1) or m.group(2) or m.group(3)
        rest = (m.group(4) or "").strip()
        j = i
        while j < len(lines):
            ln = lines[j]
            if ln.strip() and ln[0] not in " \t" and not (not rest and (ln == "-" or ln.startswith("- "))):
                break
            j += 1
        if key not in out:
            out[key] = _yaml_value(rest, lines[i:j])
        i = j
    return out


def front_matter(text: str) -> dict[str, YamlValue]:
    """The document's leading YAML metadata block, parsed (empty when there is none)."""
    span = front_matter_span(text)
    return parse_front_matter(text[span[0] : span[1]]) if span else {}
