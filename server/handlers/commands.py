"""workspace/executeCommand: suggest for the whole draft, insert a citation, note applied entries."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from citewise.models.draft_suggest import suggest_for_draft as rank_for_draft

from ..actions import EditPlan, NewEntry, cite_plan
from ..convert import plan_from_json, workspace_edit
from ..documents import cited_paper_ids
from . import diagnostics
from .completion import key_of

if TYPE_CHECKING:
    from ..state import CitewiseServer

log = logging.getLogger("citewise.lsp")


async def suggest_for_draft(ls: CitewiseServer, args: dict) -> list[dict]:
    """Suggestions for the whole draft (title, abstract, body), papers it already cites left out."""
    uri = args.get("uri") or args.get("textDocument", {}).get("uri")
    view = await ls.view(uri) if uri else None
    if view is None or ls.ranker is None:
        return []
    k = int(args.get("k") or ls.settings.k)
    rec = ls.ranker.recommender

    def work() -> list[dict]:
        excluded = cited_paper_ids(rec.library, view)
        out = []
        for s in rank_for_draft(
            rec,
            view.title,
            view.abstract,
            view.body_text(),
            k=k,
            candidates=ls.settings.candidates,
            exclude=excluded,
            rerank=ls.settings.rerank,
        ):
            pk = key_of(ls, s.paper, view).key
            out.append(
                {
                    "paperId": s.paper.id,
                    "key": pk,
                    "title": s.paper.title,
                    "year": s.paper.year,
                    "authors": s.paper.authors,
                    "venue": s.paper.venue,
                    "doi": s.paper.doi or None,
                    "score": round(s.score, 6),
                    "reasons": s.reasons,
                    "inBib": pk in view.bib,
                }
            )
        return out

    return await ls.in_pool(ls.rank_pool, work)


async def insert_citation(ls: CitewiseServer, args: dict) -> dict:
    """Add a paper's entry to the .bib (and, with ``range``, put its key in the draft) via applyEdit."""
    if "plan" in args:
        try:
            plan = plan_from_json(args["plan"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _bad_args(f"'plan' is not a plan this server sent ({type(exc).__name__}: {exc})") from None
    else:
        planned = await _plan_for_paper(ls, args)
        if isinstance(planned, dict):
            return planned
        plan = planned
    edit = workspace_edit(ls, plan, create_on_disk=True)
    if edit is None:  # it writes where the server may not (workspace_edit said so to the user)
        return {"applied": False, "reason": "the edit writes outside what this server may write"}
    result = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(edit=edit, label="citewise: cite")
    )
    applied = bool(result and result.applied)
    if applied:
        note_entries(ls, plan.entries)
    return {"applied": applied}


async def _plan_for_paper(ls: CitewiseServer, args: dict) -> EditPlan | dict:
    """The plan citing ``args["paperId"]`` (a dict answer when there is nothing to apply)."""
    if ls.ranker is None:
        return {"applied": False, "reason": "store not loaded"}
    uri, paper_id, where = _insert_args(args)
    view = await ls.view(uri)
    paper = await ls.in_pool(ls.fast_pool, ls.ranker.library.get, paper_id)
    if view is None or paper is None:
        return {"applied": False, "reason": "unknown document or paper"}
    slot = None
    if where is not None:
        (sl, sc), (el, ec) = where
        slot = (view.lines.offset(sl, sc), view.lines.offset(el, ec), "", "")
    bib_path = str(args.get("bib") or view.target_bib)
    if not os.path.isabs(bib_path) or not view.may_write(bib_path) or not ls.write_rule().may_write(bib_path):
        return {"applied": False, "reason": f"not a bibliography this draft may write: {bib_path}"}
    if bib_path in view.bib_texts:
        bib_text = view.bib_texts[bib_path]
    else:
        bib_text = await ls.in_pool(ls.analysis_pool, ls.read_text, Path(bib_path))
    key, plan = cite_plan(
        paper, str(view.path), view.lines, slot, view.bib, bib_path, bib_text, ls.settings.entry_style
    )
    if not plan.changes:
        return {"applied": True, "key": key, "alreadyInBib": True}
    return plan


def _bad_args(why: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(message=f"citewise.insertCitation: {why}")


def _insert_args(args: dict) -> tuple[str, int, tuple[tuple[int, int], tuple[int, int]] | None]:
    """``uri``, ``paperId`` and ``range`` of an insertCitation call, checked: a client (another
    extension, a command link) may send anything, and a wrong one gets -32602 with one line
    saying which argument is wrong, not an internal error with the server's traceback."""
    uri, paper_id, where = args.get("uri"), args.get("paperId"), args.get("range")
    if not isinstance(uri, str):
        raise _bad_args(f"'uri' must be the draft's URI (a string), not {uri!r:.80}")
    if isinstance(paper_id, bool) or not isinstance(paper_id, int | str) or not str(paper_id).isdigit():
        raise _bad_args(f"'paperId' must be a paper's id (a whole number), not {paper_id!r:.80}")
    if where is None:
        return uri, int(paper_id), None
    try:
        ends = tuple((int(where[e]["line"]), int(where[e]["character"])) for e in ("start", "end"))
    except (KeyError, TypeError, ValueError):
        raise _bad_args(
            f"'range' must be an LSP range ({{start, end}} of line/character), not {where!r:.80}"
        ) from None
    if min(n for end in ends for n in end) < 0:
        raise _bad_args(f"'range' has a negative line or character: {where!r:.80}")
    return uri, int(paper_id), (ends[0], ends[1])


def note_entries(ls: CitewiseServer, entries: list[NewEntry]) -> None:
    """Entries the client now holds in its .bib (saved or not): count them as there."""
    for e in entries:
        ls.bibs.add_pending(e.bib_path, e.key, e.entry)
    ls.bib_stamp += 1
    diagnostics.reanalyse_all(ls)
