"""textDocument/codeAction: "Cite: Title (Year)" on placeholders, "Add missing BibTeX entry" on
unknown keys, and the reference checks' fixes: replace a suspect entry with the stored paper,
update a mismatched entry's fields from the store, cite the suggested paper instead of (or as well
as) an unlikely one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lsprotocol import types

from citewise.models.query import ContextQuery
from citewise.models.recommender import Recommendation

from ..actions import Action, finding_actions, missing_entry_action, placeholder_actions
from ..citation_checks import CitedFinding
from ..command_ids import INSERT_COMMAND, NOTE_COMMAND
from ..completion.slot import cited_elsewhere
from ..convert import entries_json, plan_json, workspace_edit
from ..documents import DraftView

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
        query = view.query_for(ph.marked)
        items = await full_list(ls, query)
        items = (await ls.in_pool(ls.fast_pool, ls.with_bib_entries, view, query, items, ls.settings.k))[
            : ls.settings.k
        ]
        out += placeholder_actions(
            ph,
            items,
            str(view.path),
            view.lines,
            view.bib,
            view.target_bib,
            bib_text,
            ls.settings.entry_style,
            cited=cited_elsewhere(view.citations(), cit),
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
    out += await check_actions(ls, view, start, end)
    return [code_action(ls, a, params.context.diagnostics, uri) for a in out]


async def check_actions(ls: CitewiseServer, view: DraftView, start: int, end: int) -> list[Action]:
    """The fixes of the reference checks' findings about keys in ``[start, end]`` of the draft.

    The findings are the checker's again (cached by entry text and context: cheap), computed in
    the analysis thread; the .bib texts are the view's, an open editor buffer's where there is one,
    so an edit's offsets are the buffer's."""
    checker = ls.checker()
    if checker is None:
        return []
    settings = ls.settings
    found: list[CitedFinding] = await ls.in_pool(
        ls.analysis_pool, checker.check, view, settings.checks, settings.context_chars
    )
    return finding_actions(
        [f for f in found if not (f.key.end < start or f.key.start > end)],
        str(view.path),
        view.lines,
        view.bib,
        view.bib_texts,
        view.target_bib,
        settings.entry_style,
    )


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
    ls: CitewiseServer, a: Action, diagnostics: Sequence[types.Diagnostic], uri: str
) -> types.CodeAction:
    fixes = [
        d
        for d in diagnostics
        if a.diagnostic_key
        and isinstance(d.data, dict)
        and d.data.get("key") == a.diagnostic_key
        and (not a.diagnostic_code or d.code == a.diagnostic_code)
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
