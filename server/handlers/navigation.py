"""textDocument/hover and textDocument/definition on a cited key."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import from_fs_path

from citewise.models.focus import focus_query

from .. import draft
from ..documents import DraftView, paper_for_key
from ..hover_text import bib_only_markdown, hover_markdown

if TYPE_CHECKING:
    from ..state import CitewiseServer

log = logging.getLogger("citewise.lsp")


async def key_at(ls: CitewiseServer, uri: str, pos: types.Position) -> tuple[DraftView, str] | None:
    view = await ls.view(uri)
    if view is None:
        return None
    cur = draft.citation_at(view.text, view.lines.offset(pos.line, pos.character), view.lang)
    if cur is None or cur.key is None or cur.key.placeholder or not cur.key.key:
        return None
    return view, cur.key.key


async def hover(ls: CitewiseServer, params: types.HoverParams) -> types.Hover | None:
    found = await key_at(ls, params.text_document.uri, params.position)
    if found is None:
        return await _placeholder_note(ls, params)
    if ls.ranker is None:
        return None
    view, key = found
    ids = view.bib.entries.get(key)
    paper = await ls.in_pool(ls.fast_pool, paper_for_key, ls.ranker.library, key, ids)
    if paper is not None:
        md = hover_markdown(paper, key, ids is not None)
    elif ids is not None:
        own = await ls.in_pool(ls.fast_pool, ls.bib_paper, view, key)
        md = bib_only_markdown(key, view.bib.files[key], ids.line)
        if own is not None:
            md = hover_markdown(own, key, True) + "\n\n" + md
    else:
        md = f"`{key}` is neither in the bibliography nor in the citewise store"
    return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, md))


async def definition(ls: CitewiseServer, params: types.DefinitionParams) -> types.Location | None:
    found = await key_at(ls, params.text_document.uri, params.position)
    if found is None:
        return None
    view, key = found
    ids = view.bib.entries.get(key)
    if ids is None:
        return None
    pos = types.Position(ids.line, 0)
    return types.Location(from_fs_path(view.bib.files[key]), types.Range(pos, pos))


async def _placeholder_note(ls: CitewiseServer, params: types.HoverParams) -> types.Hover | None:
    """On a placeholder, the words its suggestions are ranked by (its own clause where the sentence
    cites other papers too, models/focus.py), and, with an empty store, why there are none and the
    command that fills it; the completion menu shows the suggestions themselves."""
    view = await ls.view(params.text_document.uri)
    if view is None:
        return None
    offset = view.lines.offset(params.position.line, params.position.character)
    cur = draft.citation_at(view.text, offset, view.lang)
    if cur is None or (cur.key is not None and not cur.key.placeholder and cur.key.key):
        return None
    marked = draft.marked_local_context(view.text, offset, view.lang, ls.settings.context_chars)
    clause = focus_query(view.query_for(marked)).local
    lines = [f"citewise ranks this placeholder by: \u201c{clause}\u201d"] if clause else []
    note = ls.empty_store_note()
    if note is not None:
        lines.append(f"citewise: {note}")
    return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, "\n\n".join(lines))) if lines else None
