"""textDocument/completion and completionItem/resolve: the fast list at once, the reranked one when cached."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified

from citewise.indexer.store import StoredPaper
from citewise.models.query import Candidate
from citewise.models.recommender import Recommendation

from .. import draft
from ..bibindex import key_for_paper
from ..completion import build_completion, documentation, label_description
from ..convert import completion_item
from ..documents import DraftView, paper_for_key
from ..ranking import RankedList, filter_by_prefix

if TYPE_CHECKING:
    from ..state import CitewiseServer

log = logging.getLogger("citewise.lsp")


async def complete(ls: CitewiseServer, params: types.CompletionParams) -> types.CompletionList | None:
    uri = params.text_document.uri
    view = await ls.view(uri)
    if view is None:
        return None
    offset = view.lines.offset(params.position.line, params.position.character)
    cur = draft.citation_at(view.text, offset, view.lang)
    if cur is None:
        return None
    if ls.ranker is None:
        return types.CompletionList(is_incomplete=True, items=[])
    s = ls.settings
    query = view.query_for(draft.marked_local_context(view.text, offset, view.lang, s.context_chars))
    ranked: RankedList | None = ls.ranker.cached(query) if s.rerank else None
    prefix = cur.prefix
    if ranked is None:
        if s.rerank:
            ls.ranker.schedule(query)
        depth = s.candidates if prefix else s.k
        ranked = await ls.in_pool(ls.fast_pool, ls.ranker.fast, query, depth)
        complete = not s.rerank
    else:
        complete = True
    if ls.version_of(uri) != view.version:
        raise JsonRpcContentModified("the document changed; ask again")
    items, truncated = ranked.items[: s.k], False
    if prefix:  # store look-ups for the user's own keys: off the loop

        def select() -> list[Recommendation]:
            got = filter_by_prefix(ranked.items, prefix, lambda p: key_of(ls, p, view))
            return got + bib_key_matches(ls, view, prefix, {r.paper.id for r in got})

        items = await ls.in_pool(ls.fast_pool, select)
        items, truncated = items[: s.k], len(items) > s.k
    caps = ls.client_capabilities.text_document
    ci = caps.completion.completion_item if caps and caps.completion else None
    lazy_docs = bool(ci and ci.resolve_support and "documentation" in (ci.resolve_support.properties or []))
    result = build_completion(
        items,
        cur,
        view.lines,
        view.bib,
        key_style=s.entry_style,
        doc_uri=uri,
        bib_path=view.target_bib,
        complete=complete,
        with_documentation=not lazy_docs,
    )
    # While a .bib is still being indexed its own keys are missing from the list: incomplete, so
    # the client asks again on the next keystroke and gets them.
    incomplete = result.is_incomplete or truncated or not view.bib_complete
    return types.CompletionList(is_incomplete=incomplete, items=[completion_item(e) for e in result.items])


def key_of(ls: CitewiseServer, paper, view: DraftView) -> str:
    return key_for_paper(paper, view.bib, ls.settings.entry_style).key


def bib_key_matches(ls: CitewiseServer, view: DraftView, prefix: str, seen: set[int]) -> list[Recommendation]:
    """Papers of the draft's .bib whose key starts with what was typed (the user's own keys)."""
    out = []
    if ls.ranker is None:
        return out
    for key, ids in view.bib.entries.items():
        if not key.lower().startswith(prefix.lower()) or len(out) >= 10:
            continue
        p = paper_for_key(ls.ranker.library, key, ids)
        if p is None:  # not imported (yet): offer the entry as the .bib has it
            p = StoredPaper(title=ids.title or key, key=key, id=0)
        elif p.id in seen:
            continue
        seen.add(p.id)
        out.append(Recommendation(p, Candidate(p.id, 0.0, {"your .bib": 1.0}, {"your .bib": 1})))
    return out


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
                description=label_description(paper.title, in_bib)
            )
    return item
