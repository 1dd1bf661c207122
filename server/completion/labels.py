"""The menu line of a completion item: what an editor shows beside the key, for each editor.

Users pick a paper by its title, and two versions of one paper (the conference paper and its
bulletin or journal version) can carry the same key; so every editor's menu line must show the
title, and the venue where two items share a key. Editors render a ``CompletionItem`` differently
(read from their source):

* Neovim's own completion (0.11+ ``vim.lsp.completion``, 0.7+ ``vim.lsp.omnifunc``): ``label``,
  ``kind``, then ``detail`` as the menu column; ``labelDetails`` unused.
* eglot (1.9 as in Debian 12, and eglot.el today; completion-at-point, company, corfu): the
  candidate is ``label`` (an item with a ``textEdit``), the annotation ``detail`` (the kind's
  name when ``detail`` is empty).
* nvim-cmp: ``label``, kind, then ``labelDetails.detail`` and ``labelDetails.description`` joined
  without a space as the menu column.
* blink.cmp: ``label`` + ``labelDetails.detail`` (one column, at most 60 wide), then
  ``labelDetails.description`` (at most 30; docs/editors.md shows how to widen it).
* VS Code: ``label``, ``labelDetails.detail`` right after it, ``labelDetails.description`` on the
  right; ``detail`` only in the details pane.

Hence: ``detail`` and ``labelDetails.description`` both carry the menu line, title first
("Dense Passage Retrieval for Open-Domain Question Answering (Karpukhin et al. 2020, EMNLP)"),
so the title is what every editor shows first and what VS Code keeps on the right.
``labelDetails.detail`` is empty except on items whose key another item of the list shares: there
it names the version (" (SIGIR Forum, 2019) "), which VS Code and blink.cmp show right after the
key, before any title is cut, and nvim-cmp in front of the menu line (hence the spaces around it).
``label`` stays the key: what is inserted (the ``textEdit``) is what the user sees first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from citewise.indexer.store import StoredPaper

BIB_MARK = "✓ in .bib · "  # in front of the menu line of a paper the draft's .bib already has
TITLE_CHARS = 70  # a longer title is cut at a word: the menu line must leave room for the venue
VENUE_CHARS = 32

_PROCEEDINGS = re.compile(
    r"^(?:in\s+)?(?:proceedings\s+of\s+(?:the\s+)?)?(?:(?:\d+(?:st|nd|rd|th)|(?:19|20)\d\d)\s+)*", re.I
)
_YEAR_SUFFIX = re.compile(r"[\s'’-]*\d{2,4}$")  # "SIGIR '19", "CHIIR'20", "KDD-2019"
_ACRONYM_IN_PARENS = re.compile(r"\(([A-Z][A-Za-z]*[A-Z][A-Za-z0-9&-]*)(?:[\s'’-]*\d{2,4})?\)")
_CAPS_WORD = re.compile(r"\b[A-Z][A-Z0-9&-]{2,}\b")
_PUBLISHERS = {"ACM", "IEEE", "SIAM"}  # all capitals, but they name no venue


def short_authors(authors: list[str], n: int = 3) -> str:
    """``Smith, Jones and Lee`` / ``Smith et al.``: last names, enough to recognise a paper."""
    last = [a.split(",")[0].strip() if "," in a else a.split()[-1] if a.split() else a for a in authors]
    last = [x for x in last if x]
    if not last:
        return "unknown authors"
    if len(last) > n:
        return f"{last[0]} et al."
    if len(last) == 1:
        return last[0]
    return ", ".join(last[:-1]) + " and " + last[-1]


def short_title(title: str, n: int = TITLE_CHARS) -> str:
    """The title, cut at a word boundary with an ellipsis when longer than ``n`` characters."""
    title = " ".join(title.split())
    return title if len(title) <= n else title[: n - 1].rsplit(" ", 1)[0] + "…"


def short_venue(paper: StoredPaper, n: int = VENUE_CHARS) -> str:
    """A venue short enough for a menu line: the BibTeX ``series`` (``SIGIR '19`` -> ``SIGIR``),
    else the venue without "Proceedings of the 42nd" when short, its acronym in parentheses, its
    capitalised words (``SIGIR`` of "... International ACM SIGIR Conference on ..."), or its cut
    start.

    A full proceedings title is longer than most menus are wide, and the venue is what tells two
    versions of a paper apart, so it must survive on the line.
    """
    series = _YEAR_SUFFIX.sub("", " ".join((paper.extra or {}).get("series", "").split()))
    if series and len(series) <= n:
        return series
    venue = " ".join(paper.venue.split())
    venue = _PROCEEDINGS.sub("", venue) or venue  # "Proceedings of the 42nd ..." names no venue
    if len(venue) <= n:
        return venue
    m = _ACRONYM_IN_PARENS.search(venue)
    if m:
        return m.group(1)
    caps = [w for w in _CAPS_WORD.findall(venue) if w not in _PUBLISHERS]
    if caps:
        return " ".join(caps[:2])
    return short_title(venue, n)


def menu_line(paper: StoredPaper, in_bib: bool) -> str:
    """``Title (Author et al. 2019, SIGIR)``, marked when the .bib has the paper: the ``detail``
    and ``labelDetails.description`` of its completion item (see the module's table)."""
    who = short_authors(paper.authors, n=2) if any(a.strip() for a in paper.authors) else ""
    when = " ".join(x for x in (who, str(paper.year) if paper.year else "") if x)
    tail = ", ".join(x for x in (when, short_venue(paper)) if x)
    return (BIB_MARK if in_bib else "") + short_title(paper.title) + (f" ({tail})" if tail else "")


def version_tags(keyed: Sequence[tuple[str, StoredPaper]]) -> list[str]:
    """``labelDetails.detail`` for each ``(key, paper)`` of a list, in order: empty for a key no
    other item has, else the version (`` (SIGIR Forum, 2019) ``, numbered when even venue and
    year agree), so items of one key differ where VS Code and blink.cmp cut no text."""
    groups: dict[str, list[int]] = {}
    for i, (key, _) in enumerate(keyed):
        groups.setdefault(key, []).append(i)
    tags = [""] * len(keyed)
    for members in groups.values():
        if len(members) < 2:
            continue
        names = [_version_name(keyed[i][1]) for i in members]
        for n, (i, name) in enumerate(zip(members, names, strict=True), 1):
            tags[i] = f" ({name}) " if names.count(name) == 1 else f" ({name} #{n}) "
    return tags


def _version_name(paper: StoredPaper) -> str:
    where = short_venue(paper) or paper.entry_type
    return ", ".join(x for x in (where, str(paper.year) if paper.year else "") if x)
