"""textDocument/codeAction end to end through the real server, on a small store the test writes:
"Cite: Title (Year)" on a placeholder (one edit: key in the draft, entry in the .bib), re-use of
an entry the .bib has under another key, "Add missing BibTeX entry", and a client that cannot
create files (the server creates the .bib, then applies the edit).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from ..lsp_harness import ACM_DRAFT, ACM_REFS, INSERT, Session, build_store, edit_texts, position, start, stop

pytestmark = pytest.mark.asyncio(loop_scope="module")

DENSE = "A dual encoder of questions and passages trained with in-batch negatives retrieves passages for open-domain question answering"
REFS = "@article{own2020,\n  title = {An Entry of My Own},\n  year = 2020\n}\n"


def latex(body: str, bib: str = "refs") -> str:
    return f"\\documentclass{{article}}\n\\begin{{document}}\n{body}\n\\bibliography{{{bib}}}\n\\end{{document}}\n"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return build_store(tmp_path_factory.mktemp("store"), with_jsonl=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp(tmp_path_factory, store: Path) -> Session:
    root = tmp_path_factory.mktemp("ws")
    session = await start(root, store, "visual-studio-code")
    yield session
    await stop(session)


def bib_edit_texts(action: types.CodeAction) -> list[str]:
    out = []
    for c in (action.edit.document_changes or []) if action.edit else []:
        if isinstance(c, types.TextDocumentEdit) and c.text_document.uri.endswith(".bib"):
            out += [e.new_text for e in c.edits]
    return out


async def test_cite_actions_put_the_key_in_the_draft_and_the_entry_in_the_bib(lsp: Session) -> None:
    (lsp.root / "refs.bib").write_text(REFS)
    uri = lsp.open("cite.tex", latex(f"{DENSE} \\cite{{}}."))
    diags = await lsp.latest_diagnostics(uri)
    actions = await lsp.code_actions(uri, "\\cite{", diags)
    assert 1 <= len(actions) <= 5 and all(a.kind == types.CodeActionKind.QuickFix for a in actions)
    assert actions[0].title == "Cite: Dense Passage Retrieval for Open-Domain Question Answering (2020)"
    assert actions[0].is_preferred and not any(a.is_preferred for a in actions[1:])
    top = actions[0]
    assert (
        top.command is not None and top.command.command != INSERT
    )  # the edit does it all; the command notes it
    lsp.apply(top.edit)
    await lsp.command(top.command.command, *(top.command.arguments or []))
    assert "\\cite{karpukhin2020dense}" in lsp.buffers[uri]
    (entry,) = bib_edit_texts(top)
    assert re.search(r"@inproceedings\{karpukhin2020dense,", entry)
    assert (lsp.root / "refs.bib").read_text() == REFS  # into the buffer, not saved
    # The key just cited is not "missing", though the .bib on disk does not have it yet.
    await lsp.wait_for(
        lambda: (
            (pub := [p for p in lsp.publications if p.uri == uri and p.version == lsp.versions[uri]])
            and not pub[-1].diagnostics
        ),
        "no diagnostics for the new version",
    )


MONOBERT = "We fine-tune BERT as a cross-encoder that reads a query and a passage together and reranks BM25 candidates"
GLACIER = "Recurrent neural networks forecast daily glacier melt from temperature series better than degree-day models"


async def test_an_entry_the_bib_has_under_another_key_is_reused(lsp: Session) -> None:
    mine = "@article{myMonoBERT,\n  title = {Passage Re-ranking with {BERT}},\n  year = 2019\n}\n"
    (lsp.root / "mine.bib").write_text(mine)
    uri = lsp.open("reuse.tex", latex(f"{MONOBERT} \\cite{{}}.", bib="mine"))

    async def ask() -> types.CodeAction | None:  # the .bib is indexed in the background
        got = [
            a
            for a in await lsp.code_actions(uri, "\\cite{")
            if a.title == "Cite: Passage Re-ranking with BERT (2019)"
        ]
        return got[0] if got and "myMonoBERT" in str(got[0].edit) else None

    action = await lsp.poll(ask, "the action to use the .bib's key")
    assert bib_edit_texts(action) == []  # nothing appended
    assert action.command is None  # no entry to note
    lsp.apply(action.edit)
    assert "\\cite{myMonoBERT}" in lsp.buffers[uri]


async def test_an_entry_pending_in_one_bib_is_not_in_another(lsp: Session) -> None:
    for name in ("a.bib", "b.bib"):
        (lsp.root / name).write_text(REFS)
    a = lsp.open("a.tex", latex(f"{GLACIER} \\cite{{}}.", bib="a"))
    b = lsp.open("b.tex", latex(f"{GLACIER} \\cite{{}}.", bib="b"))
    top_b = (await lsp.code_actions(b, "\\cite{"))[0]
    assert top_b.title.startswith("Cite: ") and len(bib_edit_texts(top_b)) == 1
    key = bib_edit_texts(top_b)[0].split("{", 1)[1].split(",", 1)[0]  # a glacier paper (ranking's call)
    top_a = (await lsp.code_actions(a, "\\cite{"))[0]
    assert top_a.title == top_b.title
    lsp.apply(top_a.edit)  # the entry goes into a.bib's buffer, unsaved
    await lsp.command(top_a.command.command, *(top_a.command.arguments or []))  # answered: noted
    top_b = (await lsp.code_actions(b, "\\cite{"))[0]
    assert top_b.title == top_a.title
    (entry,) = bib_edit_texts(top_b)  # b.bib still needs the entry
    assert f"{{{key}," in entry


async def test_add_missing_entry_for_a_key_the_store_knows(lsp: Session) -> None:
    (lsp.root / "refs2.bib").write_text(REFS)
    uri = lsp.open("missing.tex", latex("As in \\cite{nogueira2019passage}.", bib="refs2"))
    diags = await lsp.latest_diagnostics(uri)
    (warning,) = [d for d in diags if d.severity == types.DiagnosticSeverity.Warning]
    actions = await lsp.code_actions(uri, "\\cite{nog", [warning])
    (add,) = [a for a in actions if a.title.startswith("Add missing BibTeX entry for nogueira2019passage")]
    assert list(add.diagnostics) == [warning] and add.is_preferred
    (entry,) = bib_edit_texts(add)
    assert "@article{nogueira2019passage," in entry and "Passage Re-ranking with {BERT}" in entry
    lsp.apply(add.edit)
    assert lsp.buffers[uri].count("nogueira2019passage") == 1  # the draft is unchanged
    unknown = lsp.open("unknown.tex", latex("As in \\cite{nosuchkey2001}.", bib="refs2"))
    await lsp.latest_diagnostics(unknown)
    assert not [a for a in await lsp.code_actions(unknown, "\\cite{nos") if a.title.startswith("Add missing")]


async def test_a_client_that_cannot_create_files_gets_a_command(tmp_path: Path, store: Path) -> None:
    """Neovim's capabilities: no documentChanges. With no .bib yet, the action is a command: the
    server creates the file, then applies the edit; with a .bib, a plain ``changes`` edit."""
    root = tmp_path / "ws"
    root.mkdir()
    nvim = await start(root, store, "neovim")
    try:
        uri = nvim.open("draft.tex", latex(f"{DENSE} \\cite{{}}."))
        actions = await nvim.code_actions(uri, "\\cite{")
        top = actions[0]
        assert top.edit is None and top.command is not None and top.command.command == INSERT
        assert not (root / "refs.bib").exists()
        await nvim.command(top.command.command, *(top.command.arguments or []))
        assert (root / "refs.bib").exists()  # created empty by the server; the entry is in the buffer
        assert "\\cite{karpukhin2020dense}" in nvim.buffers[uri]
        assert any("@inproceedings{karpukhin2020dense," in e for e in nvim.bib_edits)

        (root / "refs.bib").write_text(REFS)
        other = nvim.open("other.tex", latex(f"{DENSE} \\cite{{}}."))
        top = (await nvim.code_actions(other, "\\cite{"))[0]
        assert top.edit is not None and top.edit.document_changes is None and top.edit.changes
        assert set(top.edit.changes) == {other, nvim.uri("refs.bib")}
    finally:
        await stop(nvim)


# -- on a real ACM-CR store ------------------------------------------------------------------------
# ~1,600 SIGIR and CHIIR papers (``lsp_store`` and the ``acm_*`` fixtures in conftest.py; skipped
# without ../shared/data), with the capabilities of VS Code and of Neovim.


def _cite_actions_params(session: Session, uri: str, needle: str) -> types.CodeActionParams:
    """A code action request at the end of ``needle``, with no diagnostics in its context."""
    at = position(session.buffers[uri], needle)
    return types.CodeActionParams(
        types.TextDocumentIdentifier(uri), types.Range(at, at), types.CodeActionContext(diagnostics=[])
    )


@pytest.mark.slow
async def test_code_actions_cite_and_reuse_existing_key(acm_lsp: Session) -> None:
    """Five "Cite:" actions, each ONE edit (key and entry); once the user's .bib holds the paper
    under their own key (same DOI), the action re-uses that key and adds nothing."""
    uri = acm_lsp.open("draft.tex")
    params = _cite_actions_params(acm_lsp, uri, r"ad-hoc retrieval \cite{")
    actions = await acm_lsp.client.text_document_code_action_async(params)
    cites = [a for a in actions if a.title.startswith("Cite: ")]
    assert len(cites) == 5
    assert re.search(r"\((19|20)\d\d\)$", cites[0].title)
    first = edit_texts(cites[0].edit)
    bib_uri = acm_lsp.uri("refs.bib")
    assert set(first) == {uri, bib_uri}  # ONE edit: the key and the entry
    key = first[uri][0]
    assert first[bib_uri][0].lstrip().startswith("@inproceedings{" + key)
    # The user's .bib gets that paper under their own key (same DOI): the action re-uses it.
    doi = re.search(r"doi = \{([^}]*)\}", first[bib_uri][0]).group(1)
    (acm_lsp.root / "refs.bib").write_text(
        ACM_REFS + f"\n@inproceedings{{mine,\n  title = {{Whatever}},\n  doi = {{{doi}}}\n}}\n"
    )
    acm_lsp.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(bib_uri, types.FileChangeType.Changed)])
    )

    async def reused() -> bool:  # the .bib is re-read in the background
        actions = await acm_lsp.client.text_document_code_action_async(params)
        reuse = [a for a in actions if a.title == cites[0].title]
        return bool(reuse) and edit_texts(reuse[0].edit) == {uri: ["mine"]}

    await acm_lsp.poll(reused, "the action to re-use the key 'mine'")


@pytest.mark.slow
async def test_code_action_creates_missing_bib(acm_lsp: Session) -> None:
    """No .bib yet: VS Code gets CreateFile in the edit; Neovim 0.7 (no documentChanges) gets a
    command, and the server creates the file before its workspace/applyEdit."""
    (acm_lsp.root / "refs.bib").unlink()
    uri = acm_lsp.open("draft.tex")
    needle = r"without relevance judgements \cite{?"
    at = position(ACM_DRAFT, needle)
    actions = await acm_lsp.client.text_document_code_action_async(_cite_actions_params(acm_lsp, uri, needle))
    cite = [a for a in actions if a.title.startswith("Cite: ")][0]
    bib_uri = acm_lsp.uri("refs.bib")
    if acm_lsp.caps == "visual-studio-code":
        assert any(isinstance(c, types.CreateFile) and c.uri == bib_uri for c in cite.edit.document_changes)
        draft_edit = next(
            c
            for c in cite.edit.document_changes
            if isinstance(c, types.TextDocumentEdit) and c.text_document.uri == uri
        )
        assert draft_edit.text_document.version == 1  # versioned against the open document
        return
    # On the wire this is a CodeAction {title, kind, command: {...}} without edit; a client whose
    # union structuring (CodeAction | Command) read it as a Command would see the stringified inner
    # command. Real clients (Neovim checks ``type(action.command) == "table"``) do not.
    if isinstance(cite, types.Command):
        inner = ast.literal_eval(cite.command)
    else:
        assert cite.edit is None
        inner = {"command": cite.command.command, "arguments": cite.command.arguments}
    assert inner["command"] == INSERT
    out = await acm_lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=inner["command"], arguments=inner["arguments"])
    )
    assert out["applied"] is True and (acm_lsp.root / "refs.bib").exists()
    edits = acm_lsp.apply_requests[-1].edit.changes
    key = edits[uri][0].new_text
    assert edits[bib_uri][0].new_text.startswith("@inproceedings{" + key + ",")
    assert edits[uri][0].range.start == types.Position(at.line, at.character - 1)  # replaces the "?"
