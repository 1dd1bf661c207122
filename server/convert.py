"""Plain plans, entries and diagnostics to lsprotocol types and back (the only place that knows both)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import from_fs_path

from .actions import EditPlan, FileChange, NewEntry
from .completion.items import CompletionEntry, Edit
from .diagnostic_items import Diag

if TYPE_CHECKING:
    from .state import CitewiseServer


def workspace_edit(
    ls: CitewiseServer, plan: EditPlan, create_on_disk: bool = False
) -> types.WorkspaceEdit | None:
    """The plan as a WorkspaceEdit the client understands (None: it needs a file created first, or
    it would write where the server may not: :meth:`CitewiseServer.write_rule`, said once)."""
    rule = ls.write_rule()
    refused = [c.path for c in plan.changes if not rule.may_write(c.path)]
    if refused:
        ls.show(
            f"citewise: not writing {refused[0]}: it lies outside the workspace (or is not a regular "
            "file). Name a bibliography outside the workspace in the citewise.bibliography setting to "
            "use it on purpose."
        )
        return None
    ws = ls.client_capabilities.workspace
    we = ws.workspace_edit if ws else None
    doc_changes = bool(we and we.document_changes)
    can_create = (
        doc_changes
        and we is not None
        and bool(we.resource_operations and types.ResourceOperationKind.Create in we.resource_operations)
    )
    if any(c.create for c in plan.changes) and not can_create:
        if not create_on_disk:
            return None
        for c in plan.changes:
            if c.create:
                Path(c.path).parent.mkdir(parents=True, exist_ok=True)
                Path(c.path).touch(exist_ok=True)
    if doc_changes:
        changes: list[Any] = []
        for c in plan.changes:
            uri = from_fs_path(c.path)
            if c.create and can_create:
                changes.append(
                    types.CreateFile(uri=uri, options=types.CreateFileOptions(ignore_if_exists=True))
                )
            changes.append(
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                        uri=uri, version=ls.version_of(uri)
                    ),
                    edits=[text_edit(e) for e in c.edits],
                )
            )
        return types.WorkspaceEdit(document_changes=changes)
    out: dict[str, list[types.TextEdit]] = {}
    for c in plan.changes:
        out.setdefault(from_fs_path(c.path), []).extend(text_edit(e) for e in c.edits)
    return types.WorkspaceEdit(changes=out)


def lsp_range(start: tuple[int, int], end: tuple[int, int]) -> types.Range:
    return types.Range(types.Position(*start), types.Position(*end))


def text_edit(e) -> types.TextEdit:
    return types.TextEdit(lsp_range(e.start, e.end), e.new_text)


def diagnostic(d: Diag) -> types.Diagnostic:
    return types.Diagnostic(
        range=lsp_range(d.start, d.end),
        message=d.message,
        severity=types.DiagnosticSeverity(d.severity),
        source="citewise",
        code=d.code,
        data=d.data,
    )


def completion_item(e: CompletionEntry) -> types.CompletionItem:
    """The entry as an LSP item; which editor shows which field is in server/completion/labels.py."""
    return types.CompletionItem(
        label=e.label,
        label_details=types.CompletionItemLabelDetails(
            detail=e.label_detail or None, description=e.label_description
        ),
        kind=types.CompletionItemKind.Reference,
        detail=e.detail,
        documentation=types.MarkupContent(types.MarkupKind.Markdown, e.documentation)
        if e.documentation
        else None,
        sort_text=e.sort_text,
        filter_text=e.filter_text,
        preselect=e.preselect or None,
        text_edit=types.TextEdit(lsp_range(e.edit.start, e.edit.end), e.edit.new_text),
        command=types.Command(title=e.command[0], command=e.command[1], arguments=e.command[2])
        if e.command
        else None,
        data=e.data,
    )


def plan_json(plan: EditPlan) -> dict:
    return {
        "changes": [
            {
                "path": c.path,
                "create": c.create,
                "edits": [{"start": list(e.start), "end": list(e.end), "text": e.new_text} for e in c.edits],
            }
            for c in plan.changes
        ],
        "entries": entries_json(plan.entries),
    }


def entries_json(entries: list[NewEntry]) -> list[dict]:
    return [{"bib": e.bib_path, "key": e.key, "entry": e.entry} for e in entries]


def entries_from_json(data: Any) -> list[NewEntry]:
    if not isinstance(data, list):
        return []
    return [
        NewEntry(str(e["bib"]), str(e["key"]), str(e["entry"]))
        for e in data
        if isinstance(e, dict) and {"bib", "key", "entry"} <= e.keys()
    ]


def plan_from_json(data: dict | list) -> EditPlan:
    changes = data.get("changes", []) if isinstance(data, dict) else data
    entries = entries_from_json(data.get("entries")) if isinstance(data, dict) else []
    return EditPlan(
        [
            FileChange(
                c["path"],
                [Edit(tuple(e["start"]), tuple(e["end"]), e["text"]) for e in c["edits"]],
                bool(c.get("create")),
            )
            for c in changes
        ],
        entries,
    )


def args_dict(a: list) -> dict:
    """Command arguments: one object (``{"uri": ...}``) or a bare URI."""
    if a and isinstance(a[0], dict):
        return a[0]
    if a and isinstance(a[0], str):
        return {"uri": a[0]}
    return {}
