"""textDocument/codeAction: "Cite: Title (Year)" on placeholders, "Add missing BibTeX entry" on unknown keys."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from citewise.models.query import ContextQuery
from citewise.models.recommender import Recommendation

from ..actions import Action, missing_entry_action, placeholder_actions
from ..command_ids import INSERT_COMMAND, NOTE_COMMAND
from ..convert import entries_json, plan_json, workspace_edit

if TYPE_CHECKING:
    from ..state import CitewiseServer

log = logging.getLogger("citewise.lsp")


async def code_actions(ls: CitewiseServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    view = await ls.view(uri)
    if view is None or ls.ranker is None:
        return None
    start = view.lines.offset(params.range.start.line, params.range.start.character)
    end = view.lines.offset(params.range.end.line, params.range.end.character)
    out: list[Action] = []
    bib_text = view.target_bib_text()
    # Contexts of every placeholder: analysis work, so not on the event loop.
    for ph in await ls.in_pool(ls.analysis_pool, view.placeholders, ls.settings.context_chars):
        cit = ph.citation
        if cit.end < start or cit.start > end:
            continue
        items = await full_list(ls, view.query_for(ph.marked))
        out += placeholder_actions(
            ph,
            items,
            str(view.path),
            view.lines,
            view.bib,
            view.target_bib,
            bib_text,
            ls.settings.entry_style,
        )
    missing = [
        k.key
        for cit in view.citations()
        if not (cit.end < start or cit.start > end)
        for k in cit.keys
        if not k.placeholder and k.key and k.key not in view.bib
    ]
    known = await ls.in_pool(ls.fast_pool, ls.ranker.library.by_keys, missing) if missing else {}
    for key in missing:
        paper = known.get(key)
        if paper is not None and (a := missing_entry_action(key, paper, view.bib, view.target_bib, bib_text)):
            out.append(a)
    return [code_action(ls, a, params.context.diagnostics, uri) for a in out]


async def full_list(ls: CitewiseServer, query: ContextQuery) -> list[Recommendation]:
    """The full ranking for a query: cached, else awaited within the budget, else the fast list."""
    assert ls.ranker is not None
    hit = ls.ranker.cached(query)
    if hit is None and ls.settings.rerank:
        fut = asyncio.wrap_future(ls.ranker.schedule(query))
        done, _ = await asyncio.wait([fut], timeout=max(ls.settings.budget_ms / 1000, 0.05))
        if done and not fut.cancelled() and fut.exception() is None:
            hit = fut.result()
    if hit is None:
        hit = await ls.in_pool(ls.fast_pool, ls.ranker.fast, query)
    return hit.items[: ls.settings.k]


def code_action(
    ls: CitewiseServer, a: Action, diagnostics: list[types.Diagnostic], uri: str
) -> types.CodeAction:
    fixes = [
        d
        for d in diagnostics
        if a.diagnostic_key and isinstance(d.data, dict) and d.data.get("key") == a.diagnostic_key
    ]
    edit = workspace_edit(ls, a.plan)
    if edit is not None:
        # The client runs the command after applying the edit: that is how we learn that the
        # entries are in its (maybe unsaved) .bib buffer, so they are not appended twice.
        note = types.Command(
            title=a.title, command=NOTE_COMMAND, arguments=[{"entries": entries_json(a.plan.entries)}]
        )
        return types.CodeAction(
            title=a.title,
            kind=a.kind,
            edit=edit,
            command=note if a.plan.entries else None,
            is_preferred=a.preferred,
            diagnostics=fixes or None,
        )
    # The client cannot create the missing .bib: the server creates it, then applies the edit.
    cmd = types.Command(title=a.title, command=INSERT_COMMAND, arguments=[{"plan": plan_json(a.plan)}])
    return types.CodeAction(
        title=a.title, kind=a.kind, command=cmd, is_preferred=a.preferred, diagnostics=fixes or None
    )
