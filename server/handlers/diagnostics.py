"""Diagnostics: placeholders with their best suggestions, and the reference checks of the cited
keys (:mod:`..citation_checks`: keys missing from the .bib, suspect entries, metadata mismatches,
duplicates, unlikely citations), each check switched by the ``checks`` setting.

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
from ..citation_checks import ReferenceChecker
from ..convert import diagnostic
from ..diagnostic_items import Diag, finding_diagnostic, placeholder_diagnostic
from ..documents import DraftView
from ..ranking import RankedList

if TYPE_CHECKING:
    from ..state import CitewiseServer

log = logging.getLogger("citewise.lsp")


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
    """Diagnostics for the placeholders (best suggestions) and the cited keys of the current version."""
    try:
        await asyncio.sleep(delay)
        view = await ls.view(uri) if ls.ranker is not None else None
        if view is None:
            return
        version = view.version
        phs = await ls.in_pool(ls.analysis_pool, view.placeholders, ls.settings.context_chars)
        queries = [view.query_for(ph.marked) for ph in phs]
        lists = await _placeholder_lists(ls, uri, queries)
        if lists is None or ls.version_of(uri) != version:
            return  # superseded: the newer version's task publishes
        k = ls.settings.k
        lists = await ls.in_pool(
            ls.fast_pool,
            lambda: [
                ls.with_bib_entries(view, q, items, k)[:k] for q, items in zip(queries, lists, strict=True)
            ],
        )
        note = ls.empty_store_note()
        diags = [
            placeholder_diagnostic(ph, view.lines, items, note) for ph, items in zip(phs, lists, strict=True)
        ]
        checker = ls.checker()
        if checker is not None:
            settings = ls.settings
            diags += await ls.in_pool(
                ls.analysis_pool, check_diags, checker, view, settings.checks, settings.context_chars
            )
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


def check_diags(
    checker: ReferenceChecker, view: DraftView, enabled: dict[str, bool], context_chars: int
) -> list[Diag]:
    """Worker thread: the enabled checks' findings about the keys ``view`` cites, as diagnostics
    (at most :data:`..citation_checks.MAX_FINDINGS`; the checker caps them). A checker failure
    is logged and costs only these: the placeholders' diagnostics are still published."""
    try:
        found = checker.check(view, enabled, context_chars)
    except Exception:
        log.exception("checking the citations of %s failed", view.path)
        return []
    return [finding_diagnostic(f, view.lines) for f in found]
