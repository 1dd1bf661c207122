"""textDocument/completion and completionItem/resolve: the fast list at once, the reranked one when cached."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified

from citewise.indexer.store import StoredPaper
from citewise.models.query import ContextQuery
from citewise.models.recommender import Recommendation

from .. import draft
from ..bibindex import BibEntryIds, PaperKey, key_for_paper
from ..completion.items import build_completion, documentation
from ..completion.labels import menu_line
from ..completion.slot import cited_elsewhere, order
from ..convert import completion_item
from ..documents import DraftView, paper_for_key
from ..ranking import RankedList

if TYPE_CHECKING:
    from ..state import CitewiseServer

log = logging.getLogger("citewise.lsp")
# How long a completion waits for a store that is still opening (110k papers open in 0.6 s here);
# past it the draft's own .bib answers, ranked by the sentence, and the client asks again.
STORE_WAIT_S = 0.1


async def complete(ls: CitewiseServer, params: types.CompletionParams) -> types.CompletionList | None:
    uri = params.text_document.uri
    view = await ls.view(uri)
    if view is None:
        return None
    offset = view.lines.offset(params.position.line, params.position.character)
    cur = draft.citation_at(view.text, offset, view.lang)
    if cur is None:
        return None
    s = ls.settings
    query = view.query_for(draft.marked_local_context(view.text, offset, view.lang, s.context_chars))
    typed = cur.filter_key  # the whole key under the cursor: the edit replaces all of it
    ranked, complete = await ranked_for(ls, query, bool(typed))
    if ls.version_of(uri) != view.version:
        raise JsonRpcContentModified("the document changed; ask again")
    recent = draft.recent_keys(view.text, offset, view.lang)
    library = ls.ranker.library if ls.ranker is not None else None

    def select() -> tuple[list[tuple[Recommendation, PaperKey]], bool]:  # store look-ups: off the loop
        mine = ls.with_bib_entries(view, query, ranked, s.candidates if typed else s.k)
        overlay_paper = {r.paper.key: r.paper for r in mine if not r.paper.id}

        def lookup(key: str, ids: BibEntryIds) -> StoredPaper | None:
            stored = paper_for_key(library, key, ids) if library is not None else None
            return stored or overlay_paper.get(key) or ls.bib_paper(view, key)

        return order(
            mine,
            query,
            view.bib,
            typed,
            s.k,
            key_of=lambda p: key_of(ls, p, view),
            lookup=lookup,
            recent=recent,
            cited=cited_elsewhere(view.citations(), cur.citation),
            bib_fallback=ls.store_settled.is_set(),  # not the .bib in file order while the store opens
        )

    items, truncated = await ls.in_pool(ls.fast_pool, select)
    caps = ls.client_capabilities.text_document
    ci = caps.completion.completion_item if caps and caps.completion else None
    lazy_docs = bool(ci and ci.resolve_support and "documentation" in (ci.resolve_support.properties or []))
    result = build_completion(
        items,
        cur,
        view.lines,
        doc_uri=uri,
        bib_path=view.target_bib,
        complete=complete,
        with_documentation=not lazy_docs,
    )
    # While a .bib is still being indexed its own keys are missing from the list: incomplete, so
    # the client asks again on the next keystroke and gets them.
    incomplete = result.is_incomplete or truncated or not view.bib_complete or ls.overlays.building()
    return types.CompletionList(is_incomplete=incomplete, items=[completion_item(e) for e in result.items])


async def ranked_for(
    ls: CitewiseServer, query: ContextQuery, typed: bool
) -> tuple[list[Recommendation], bool]:
    """The recommender's list for a slot and whether it is the final one: the cached full ranking,
    else the fast list (the full one scheduled). A request that comes while the store opens waits
    for it, up to :data:`STORE_WAIT_S`. No store then: nothing, and not final, so the client asks
    again; the draft's .bib entries are offered meanwhile, ranked by the sentence
    (:mod:`..bib_overlay`)."""
    if ls.ranker is None and not ls.store_settled.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ls.store_settled.wait(), STORE_WAIT_S)
    if ls.ranker is None:
        return [], False
    s = ls.settings
    ranked: RankedList | None = ls.ranker.cached(query) if s.rerank else None
    if ranked is not None:
        return ranked.items, True
    depth = s.candidates if typed else s.k  # what was typed filters a deeper list
    fast = await ls.in_pool(ls.fast_pool, ls.ranker.fast, query, depth)
    if s.rerank:
        # Scheduled after the fast list, not before: on two cores the full ranking (three views,
        # feedback, the reranker) took the CPU the keystroke's answer needed (10M papers: first
        # answer 278 ms through the server against 122 ms for the fast list alone).
        ls.ranker.schedule(query)
    return fast.items, not s.rerank


def key_of(ls: CitewiseServer, paper: StoredPaper, view: DraftView) -> PaperKey:
    """How ``paper`` is cited from this draft (its ``.bib`` key, else a new one and its entry)."""
    return key_for_paper(paper, view.bib, ls.settings.entry_style)


async def resolve(ls: CitewiseServer, item: types.CompletionItem) -> types.CompletionItem:
    data = item.data if isinstance(item.data, dict) else {}
    pid = data.get("paperId")
    if (
        ls.ranker is None
        or pid is None
        or (item.documentation is not None and item.label_details is not None)
    ):
        return item
    paper = await ls.in_pool(ls.fast_pool, ls.ranker.library.get, int(pid))
    if paper is not None:
        in_bib = bool(data.get("inBib"))
        if item.documentation is None:
            md = documentation(paper, data.get("why", ""), in_bib, data.get("key", item.label))
            item.documentation = types.MarkupContent(types.MarkupKind.Markdown, md)
        if item.label_details is None:  # a client that resolves the item without them (VS Code's
            # language client did) would replace the title beside the key with nothing
            item.label_details = types.CompletionItemLabelDetails(
                detail=data.get("labelDetail") or None, description=menu_line(paper, in_bib)
            )
    return item
