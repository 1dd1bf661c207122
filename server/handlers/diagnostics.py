"""Diagnostics: placeholders with their best suggestions, cited keys missing from the .bib.

Debounced per document; the speculative full rankings for the placeholders are scheduled here
(the second stage), and the fast list stands in for any that misses the time budget. Work for a
superseded version is dropped: only the latest version's task publishes.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING

from lsprotocol import types

from citewise.models.query import ContextQuery
from citewise.models.recommender import Recommendation

from .. import draft
from ..convert import diagnostic
from ..diagnostic_items import Diag, missing_key_diagnostic, placeholder_diagnostic
from ..documents import DraftView
from ..ranking import RankedList

if TYPE_CHECKING:
    from ..state import CitewiseServer

log = logging.getLogger("citewise.lsp")

# A draft whose thousands of keys are all missing (no .bib found) would otherwise send the
# editor a diagnostic for each on every pause in typing; the first ones say what is wrong.
MAX_MISSING_KEY_DIAGNOSTICS = 1000


def schedule_analysis(ls: CitewiseServer, uri: str, delay: float | None = None) -> None:
    """(Re)start the debounced analysis of ``uri``; a pending one for an older version is cancelled."""
    old = ls.debounce.pop(uri, None)
    if old is not None:
        old.cancel()
    if draft.language_for(uri, ls.language_id(uri)) is None:
        return
    d = ls.settings.debounce_ms / 1000 if delay is None else delay
    ls.debounce[uri] = asyncio.ensure_future(analyse(ls, uri, d))


def reanalyse_all(ls: CitewiseServer, delay: float | None = 0.0) -> None:
    """Every open draft again (the store, a .bib or the settings changed)."""
    for uri in list(ls.workspace.text_documents):
        schedule_analysis(ls, uri, delay)


def forget(ls: CitewiseServer, uri: str) -> None:
    """A closed document: stop its work, drop its caches and its diagnostics."""
    task = ls.debounce.pop(uri, None)
    if task is not None:
        task.cancel()
    ls.views.pop(uri, None)
    ls.view_stamps.pop(uri, None)
    ls.live_keys.pop(uri, None)
    if ls.ranker is not None:
        ls.ranker.retain(set().union(*ls.live_keys.values()) if ls.live_keys else set())
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


async def analyse(ls: CitewiseServer, uri: str, delay: float) -> None:
    """Diagnostics for the placeholders (best suggestions) and missing keys of the current version."""
    try:
        await asyncio.sleep(delay)
        view = await ls.view(uri) if ls.ranker is not None else None
        if view is None:
            return
        version = view.version
        phs = await ls.in_pool(ls.analysis_pool, view.placeholders, ls.settings.context_chars)
        lists = await _placeholder_lists(ls, uri, [view.query_for(ph.marked) for ph in phs])
        if lists is None or ls.version_of(uri) != version:
            return  # superseded: the newer version's task publishes
        diags = [placeholder_diagnostic(ph, view.lines, items) for ph, items in zip(phs, lists, strict=True)]
        diags += await ls.in_pool(ls.fast_pool, missing_key_diags, ls, view)
        if ls.version_of(uri) != version:
            return
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri, version=version, diagnostics=[diagnostic(d) for d in diags]
            )
        )
    except asyncio.CancelledError:
        pass
    except Exception:
        log.exception("analysis of %s failed", uri)


async def _placeholder_lists(
    ls: CitewiseServer, uri: str, queries: list[ContextQuery]
) -> list[list[Recommendation]] | None:
    """The full ranking of each query within the budget (scheduled speculatively), else the fast one."""
    ranker = ls.ranker
    assert ranker is not None
    futures: list[Future[RankedList] | None] = (
        [ranker.schedule(q) for q in queries] if ls.settings.rerank else []
    )
    ls.live_keys[uri] = {ranker.key(q) for q in queries}
    ranker.retain(set().union(*ls.live_keys.values()))
    if futures:
        wrapped = [asyncio.wrap_future(f) for f in futures if f is not None]
        await asyncio.wait(wrapped, timeout=max(ls.settings.budget_ms / 1000, 0.05))
    lists: list[list[Recommendation] | None] = []
    for f in futures or [None] * len(queries):
        ok = f is not None and f.done() and not f.cancelled() and f.exception() is None
        lists.append(f.result().items[: ls.settings.k] if ok else None)  # type: ignore[union-attr]
    missing = [i for i, x in enumerate(lists) if x is None]
    if missing:
        fast = await ls.in_pool(ls.fast_pool, lambda: [ranker.fast(queries[i]).items for i in missing])
        for i, items in zip(missing, fast, strict=True):
            lists[i] = items
    return lists  # type: ignore[return-value]


def missing_key_diags(ls: CitewiseServer, view: DraftView) -> list[Diag]:
    """A warning for each cited key the bibliography lacks (naming the paper when the store knows it)."""
    missing = [
        (cit, i, k.key)
        for cit in view.citations()
        for i, k in enumerate(cit.keys)
        if not k.placeholder and k.key and k.key not in view.bib
    ][:MAX_MISSING_KEY_DIAGNOSTICS]
    library = ls.ranker.library if ls.ranker else None
    known = library.by_keys(key for _c, _i, key in missing) if library is not None and missing else {}
    out = []
    for cit, i, key in missing:
        paper = known.get(key)
        out.append(missing_key_diagnostic(cit, i, view.lines, paper.title if paper else None))
    return out
