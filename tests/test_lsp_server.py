"""End to end over stdio: the real ``citewise serve`` driven by pytest-lsp clients.

Each test starts a server on a store built once per session from real ACM-CR files (SIGIR
2015-2019 and CHIIR, ~1,600 papers) and a fresh workspace in a temp dir, with the client
capabilities of VS Code or Neovim (they differ in what matters here: lazily resolved
documentation, ``documentChanges``/``CreateFile``, ``workspace/configuration``, file watchers).
"""

from __future__ import annotations

import ast
import asyncio
import re
import time
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from .conftest import ACM_DL, require, server_command
from .lsp_harness import read_code_actions_like_editors

pytestmark = [pytest.mark.slow]

# Generous: a bound that only fails when the state never comes (speed is for bench/, not tests).
TIMEOUT = 120.0

DRAFT = r"""\documentclass{article}
\title{Neural ranking models for ad-hoc retrieval}
\begin{document}
\maketitle
\begin{abstract}
We study neural ranking models and weak supervision for ad-hoc document retrieval.
\end{abstract}
Neural ranking models trained with weak supervision improve ad-hoc retrieval \cite{}.
Query performance prediction estimates the effectiveness of a query without relevance judgements \cite{?}.
We compare with \citep{foo2020, }.
\bibliography{refs}
\end{document}
"""

REFS = """@article{foo2020,
  title = {A Foo Paper About Nothing In Particular},
  author = {Foo, Bar},
  year = {2020}
}
"""


@pytest.fixture(scope="session")
def lsp_store(tmp_path_factory) -> Path:
    """A few thousand real ACM-CR papers with the BM25 index, built once per session."""
    require(ACM_DL)
    from citewise.indexer import bm25_files
    from citewise.indexer.importer import import_sources
    from citewise.indexer.store import Store

    path = tmp_path_factory.mktemp("lsp-store") / "papers.sqlite"
    store = Store(path)
    files = sorted((ACM_DL / "sigir").glob("sigir-201[5-9].bib")) + sorted((ACM_DL / "chiir").glob("*.bib"))
    import_sources(store, files)
    bm25_files.load_or_build(store)
    store.close()
    return path


@pytest.fixture
def workspace(tmp_path: Path, lsp_store: Path) -> Path:
    """A workspace with the draft and its .bib; a private copy of the store (tests import into it)."""
    import shutil

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "draft.tex").write_text(DRAFT)
    (ws / "refs.bib").write_text(REFS)
    for f in lsp_store.parent.iterdir():
        if f.is_file():
            shutil.copy(f, tmp_path / f.name)
        else:
            shutil.copytree(f, tmp_path / f.name)
    return ws


class Session:
    """A started client plus what it received that pytest-lsp does not record by itself."""

    def __init__(self, client: LanguageClient, root: Path) -> None:
        self.client = client
        self.root = root
        self.applied: list[types.ApplyWorkspaceEditParams] = []
        self.registrations: list[types.Registration] = []

    def uri(self, name: str) -> str:
        return from_fs_path(str(self.root / name))

    def open(self, name: str, text: str | None = None, language_id: str = "latex") -> str:
        uri = self.uri(name)
        if text is None:
            text = (self.root / name).read_text()
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=text)
            )
        )
        return uri

    def change(self, uri: str, version: int, text: str) -> None:
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                [types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    async def complete(self, uri: str, line: int, char: int) -> types.CompletionList:
        result = await self.client.text_document_completion_async(
            types.CompletionParams(types.TextDocumentIdentifier(uri), types.Position(line, char))
        )
        assert isinstance(result, types.CompletionList), result
        return result

    async def complete_until_full(
        self, uri: str, line: int, char: int
    ) -> tuple[types.CompletionList, types.CompletionList]:
        """The first answer, and the first complete one (``isIncomplete`` false): asked again
        until it comes."""
        first = await self.complete(uri, line, char)
        if not first.is_incomplete:
            return first, first

        async def full() -> types.CompletionList | None:
            result = await self.complete(uri, line, char)
            return None if result.is_incomplete else result

        return first, await self.poll(full, "the complete (reranked) list")

    async def wait_for(self, predicate, what: str, timeout: float = TIMEOUT):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            value = predicate()
            if value:
                return value
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    async def poll(self, ask, what: str, timeout: float = TIMEOUT):
        """Ask the server again until the answer is truthy (returned); fail only if it never is."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            value = await ask()
            if value:
                return value
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    async def diagnostics(self, uri: str) -> list[types.Diagnostic]:
        return await self.wait_for(lambda: self.client.diagnostics.get(uri), f"diagnostics of {uri}")


def pos_of(text: str, needle: str, after: int = 0) -> tuple[int, int]:
    """(line, character) just after ``needle`` (``after`` extra characters into it backwards)."""
    i = text.index(needle) + len(needle) - after
    line = text.count("\n", 0, i)
    return line, i - (text.rfind("\n", 0, i) + 1)


async def start(
    root: Path, store: Path, caps: str, init: dict | None = None, config: dict | None = None
) -> Session:
    cfg = ClientServerConfig(server_command=server_command("--store", str(store)))
    client = await cfg.start()
    read_code_actions_like_editors(client)
    session = Session(client, root)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        session.applied.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        session.registrations.extend(params.registrations)

    if config is not None:
        client.set_configuration(config, section="citewise")
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities(caps),
            root_uri=from_fs_path(str(root)),
            workspace_folders=[types.WorkspaceFolder(from_fs_path(str(root)), "ws")],
            initialization_options={"debounceMs": 50, **(init or {})},
        )
    )
    await session.wait_for(
        lambda: any("citewise ready" in m.message for m in client.log_messages), "the server"
    )
    return session


@pytest_asyncio.fixture(params=["visual-studio-code", "neovim"])
async def lsp(request, workspace: Path):
    session = await start(workspace, workspace.parent / "papers.sqlite", request.param)
    session.caps = request.param  # type: ignore[attr-defined]
    yield session
    await session.client.shutdown_session()
    await session.client.stop()


@pytest_asyncio.fixture
async def vscode(workspace: Path):
    session = await start(workspace, workspace.parent / "papers.sqlite", "visual-studio-code")
    yield session
    await session.client.shutdown_session()
    await session.client.stop()


@pytest.fixture(scope="module")
def shared_workspace(tmp_path_factory, lsp_store: Path) -> Path:
    """One workspace for the tests that only read it (each opens its own document)."""
    import shutil

    base = tmp_path_factory.mktemp("shared")
    ws = base / "ws"
    ws.mkdir()
    (ws / "refs.bib").write_text(REFS)
    for f in lsp_store.parent.iterdir():
        (shutil.copy if f.is_file() else shutil.copytree)(f, base / f.name)
    return ws


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(shared_workspace: Path):
    """One VS Code-like server for the read-only tests: a server start costs seconds on 2 cores."""
    session = await start(shared_workspace, shared_workspace.parent / "papers.sqlite", "visual-studio-code")
    yield session
    await session.client.shutdown_session()
    await session.client.stop()


# ---------------------------------------------------------------------------------------------
# Completion
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_completion_incomplete_then_reranked(workspace: Path, lsp_store: Path):
    """A long debounce keeps the speculative ranking from starting before we ask: the first
    answer is the fast prefetch list (isIncomplete), asking again serves the full ranking."""
    session = await start(
        workspace, workspace.parent / "papers.sqlite", "visual-studio-code", {"debounceMs": 5000}
    )
    try:
        uri = session.open("draft.tex")
        line, char = pos_of(DRAFT, r"ad-hoc retrieval \cite{")
        first, final = await session.complete_until_full(uri, line, char)
        assert first.is_incomplete is True and first.items
        assert final.is_incomplete is False and final.items
        assert [i.sort_text for i in final.items] == sorted(i.sort_text for i in final.items)
        assert len(final.items) <= 20
    finally:
        await session.client.shutdown_session()
        await session.client.stop()


@pytest.mark.asyncio
async def test_completion_items(lsp: Session):
    uri = lsp.open("draft.tex")
    line, char = pos_of(DRAFT, r"ad-hoc retrieval \cite{")
    _first, result = await lsp.complete_until_full(uri, line, char)
    items = result.items
    assert 5 <= len(items) <= 20
    top = items[0]
    # label = a readable key in the default style (lastnameYEARfirstword; ACM's DOI keys are not
    # used as cite keys), detail = authors, year, venue
    assert re.fullmatch(r"[a-z]+(19|20)\d\d[a-z]+", top.label)
    assert re.search(r"\b(19|20)\d\d\b", top.detail)
    assert "weak supervision" in " ".join(i.filter_text.lower() for i in items[:5])
    for it in items:
        assert it.filter_text.startswith(it.label)  # key first, then title words and first author
        assert it.text_edit.range.start == types.Position(line, char) == it.text_edit.range.end
        assert it.text_edit.new_text == it.label
        assert (
            it.command is not None and it.command.command == "citewise.insertCitation"
        )  # none is in refs.bib
    if lsp.caps == "visual-studio-code":  # resolveSupport for documentation: filled lazily
        assert top.documentation is None
        resolved = await lsp.client.completion_item_resolve_async(top)
        assert resolved.sort_text == top.sort_text and resolved.filter_text == top.filter_text
        assert resolved.text_edit == top.text_edit
        doc = resolved.documentation
    else:
        doc = top.documentation
    assert isinstance(doc, types.MarkupContent) and doc.kind == types.MarkupKind.Markdown
    assert "*Why:*" in doc.value and "**" in doc.value


@pytest.mark.asyncio
async def test_completion_second_key_and_bib_marking(vscode: Session):
    """``\\citep{foo2020, |}``: only the empty slot is replaced; a .bib paper shows as in the .bib."""
    uri = vscode.open("draft.tex")
    line, char = pos_of(DRAFT, r"\citep{foo2020, ")
    _first, result = await vscode.complete_until_full(uri, line, char)
    assert result.items
    for it in result.items:
        assert it.text_edit.range.start == it.text_edit.range.end == types.Position(line, char)
        assert it.label != "foo2020"
    # typed prefix of the user's own key: the .bib entry is offered, marked, without a command
    text = DRAFT.replace(r"\citep{foo2020, }", r"\citep{foo2020, fo}")
    vscode.change(uri, 2, text)
    line, char = pos_of(text, r"\citep{foo2020, fo")
    result = await vscode.complete(uri, line, char)
    mine = [i for i in result.items if i.label == "foo2020"]
    # foo2020 is already in this citation, so it must not be offered twice
    assert not mine
    text2 = DRAFT.replace(r"\citep{foo2020, }", r"\citep{fo}")
    vscode.change(uri, 3, text2)
    line, char = pos_of(text2, r"\citep{fo")
    _first, result = await vscode.complete_until_full(uri, line, char)
    mine = [i for i in result.items if i.label == "foo2020"]
    assert mine and mine[0].command is None and "in .bib" in mine[0].label_details.description
    assert mine[0].text_edit.range.start.character == char - 2  # replaces the typed "fo" only


@pytest.mark.asyncio(loop_scope="module")
async def test_completion_prefix_filters_by_title_word(shared: Session):
    """Typing a title word filters server-side; every item keeps a word the client's fuzzy filter matches."""
    text = DRAFT.replace(r"ad-hoc retrieval \cite{}", r"ad-hoc retrieval \cite{weak}")
    uri = shared.open("prefix.tex", text)
    line, char = pos_of(text, r"ad-hoc retrieval \cite{weak")
    _first, result = await shared.complete_until_full(uri, line, char)
    assert result.items
    for it in result.items:
        words = re.findall(r"[a-z0-9]+", it.filter_text.lower())
        assert any(w.startswith("weak") for w in words), it.filter_text
        assert it.text_edit.range.start.character == char - 4 and it.text_edit.range.end.character == char


@pytest.mark.asyncio(loop_scope="module")
async def test_completion_markdown(shared: Session):
    md = "---\ntitle: Query performance prediction\nbibliography: refs.bib\n---\n\nPredicting query difficulty without judgements [@].\n"
    (shared.root / "notes.md").write_text(md)
    uri = shared.open("notes.md", md, "markdown")
    line, char = pos_of(md, "[@")
    _first, result = await shared.complete_until_full(uri, line, char)
    assert result.items
    assert all(i.text_edit.new_text == i.label for i in result.items)


@pytest.mark.asyncio
async def test_insert_command_appends_bib_entry(lsp: Session):
    """The item's command makes the server send workspace/applyEdit appending the BibTeX entry."""
    (lsp.root / "refs.bib").unlink()  # the .bib does not exist yet: it must be created
    uri = lsp.open("draft.tex")
    line, char = pos_of(DRAFT, r"ad-hoc retrieval \cite{")
    _first, result = await lsp.complete_until_full(uri, line, char)
    item = result.items[0]
    out = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=item.command.command, arguments=item.command.arguments)
    )
    assert out["applied"] is True
    assert len(lsp.applied) == 1
    edit = lsp.applied[0].edit
    bib_uri = lsp.uri("refs.bib")
    if lsp.caps == "visual-studio-code":
        creates = [c for c in edit.document_changes if isinstance(c, types.CreateFile)]
        assert creates and creates[0].uri == bib_uri
        texts = [
            e.new_text
            for c in edit.document_changes
            if isinstance(c, types.TextDocumentEdit)
            for e in c.edits
        ]
    else:  # no documentChanges: the server created the file, the edit is a plain change
        assert (lsp.root / "refs.bib").exists()
        texts = [e.new_text for e in edit.changes[bib_uri]]
    assert len(texts) == 1 and texts[0].lstrip().startswith("@inproceedings{" + item.label + ",")


# ---------------------------------------------------------------------------------------------
# Code actions, diagnostics, hover, definition
# ---------------------------------------------------------------------------------------------


def _edits(edit: types.WorkspaceEdit) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if edit.document_changes:
        for c in edit.document_changes:
            if isinstance(c, types.TextDocumentEdit):
                out.setdefault(c.text_document.uri, []).extend(e.new_text for e in c.edits)
    for uri, edits in (edit.changes or {}).items():
        out.setdefault(uri, []).extend(e.new_text for e in edits)
    return out


@pytest.mark.asyncio
async def test_code_actions_cite_and_reuse_existing_key(lsp: Session):
    uri = lsp.open("draft.tex")
    line, char = pos_of(DRAFT, r"ad-hoc retrieval \cite{")
    rng = types.Range(types.Position(line, char), types.Position(line, char))
    params = types.CodeActionParams(
        types.TextDocumentIdentifier(uri), rng, types.CodeActionContext(diagnostics=[])
    )
    actions = await lsp.client.text_document_code_action_async(params)
    cites = [a for a in actions if a.title.startswith("Cite: ")]
    assert len(cites) == 5
    assert re.search(r"\((19|20)\d\d\)$", cites[0].title)
    first = _edits(cites[0].edit)
    assert set(first) == {uri, lsp.uri("refs.bib")}  # ONE edit: the key and the entry
    key = first[uri][0]
    assert first[lsp.uri("refs.bib")][0].lstrip().startswith("@inproceedings{" + key)
    # The user's .bib gets that paper under their own key (same DOI): the action re-uses it.
    doi = re.search(r"doi = \{([^}]*)\}", first[lsp.uri("refs.bib")][0]).group(1)
    (lsp.root / "refs.bib").write_text(
        REFS + f"\n@inproceedings{{mine,\n  title = {{Whatever}},\n  doi = {{{doi}}}\n}}\n"
    )
    lsp.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent(lsp.uri("refs.bib"), types.FileChangeType.Changed)]
        )
    )

    async def reused() -> bool:  # the .bib is re-read in the background
        actions = await lsp.client.text_document_code_action_async(params)
        reuse = [a for a in actions if a.title == cites[0].title]
        return bool(reuse) and _edits(reuse[0].edit) == {uri: ["mine"]}

    await lsp.poll(reused, "the action to re-use the key 'mine'")


@pytest.mark.asyncio(loop_scope="module")
async def test_diagnostics_and_missing_entry_action(shared: Session):
    text = DRAFT.replace(r"\citep{foo2020, }", r"\citep{foo2020, 10.1145/3077136.3080832, nosuchkey}")
    uri = shared.open("diag.tex", text)
    diags = await shared.wait_for(
        lambda: len(shared.client.diagnostics.get(uri, [])) >= 4 and shared.client.diagnostics[uri],
        "four diagnostics",
    )
    info = [d for d in diags if d.severity == types.DiagnosticSeverity.Information]
    warn = [d for d in diags if d.severity == types.DiagnosticSeverity.Warning]
    assert len(info) == 2 and all(re.match(r"\d+ suggestions; top: .+ \(\d{4}\)", d.message) for d in info)
    assert {d.data["key"] for d in warn} == {"10.1145/3077136.3080832", "nosuchkey"}
    known = next(d for d in warn if d.data["key"] != "nosuchkey")
    assert "Neural Ranking Models with Weak Supervision" in known.message
    params = types.CodeActionParams(
        types.TextDocumentIdentifier(uri), known.range, types.CodeActionContext([known])
    )
    actions = await shared.client.text_document_code_action_async(params)
    add = [a for a in actions if a.title.startswith("Add missing BibTeX entry")]
    assert len(add) == 1
    bib = _edits(add[0].edit)[shared.uri("refs.bib")][0]
    assert "@inproceedings{10.1145/3077136.3080832," in bib and "Weak Supervision" in bib


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_and_definition(shared: Session):
    text = DRAFT.replace(r"\citep{foo2020, }", r"\citep{foo2020, 10.1145/3077136.3080832}")
    uri = shared.open("hover.tex", text)
    line, char = pos_of(text, "10.1145/30771")
    hover = await shared.client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, char))
    )
    md = hover.contents.value
    assert "Neural Ranking Models with Weak Supervision" in md and "2017" in md
    assert "https://doi.org/10.1145/3077136.3080832" in md and "Dehghani" in md
    line, char = pos_of(text, r"\citep{foo2")
    loc = await shared.client.text_document_definition_async(
        types.DefinitionParams(types.TextDocumentIdentifier(uri), types.Position(line, char))
    )
    assert isinstance(loc, types.Location) and loc.uri == shared.uri("refs.bib") and loc.range.start.line == 0
    hover = await shared.client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, char))
    )
    assert "Foo Paper" in hover.contents.value


# ---------------------------------------------------------------------------------------------
# Commands, configuration, file watching
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio(loop_scope="module")
async def test_suggest_for_draft_excludes_cited(shared: Session):
    text = DRAFT.replace(r"\citep{foo2020, }", r"\citep{foo2020, 10.1145/3077136.3080832}")
    uri = shared.open("suggest.tex", text)
    out = await shared.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="citewise.suggestForDraft", arguments=[{"uri": uri, "k": 10}])
    )
    assert 5 <= len(out) <= 10
    assert all(s["reasons"] for s in out)
    assert "10.1145/3077136.3080832" not in {s["key"] for s in out}
    assert any("neural" in s["title"].lower() or "ranking" in s["title"].lower() for s in out[:5])


@pytest.mark.asyncio
async def test_reindex_reports_progress_and_keeps_serving(vscode: Session):
    uri = vscode.open("draft.tex")
    line, char = pos_of(DRAFT, r"ad-hoc retrieval \cite{")
    task = asyncio.ensure_future(
        vscode.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="citewise.reindex", arguments=[{"force": True}])
        )
    )
    during = await vscode.complete(uri, line, char)  # the old index serves meanwhile
    assert during.items
    result = await asyncio.wait_for(task, TIMEOUT)
    assert result["done"] is True and result["papers"] > 1000 and result["files"] >= 10
    reports = next(iter(vscode.client.progress_reports.values()))
    kinds = [type(r).__name__ for r in reports]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    assert "WorkDoneProgressReport" in kinds and reports[0].cancellable
    _first, after = await vscode.complete_until_full(uri, line, char)
    assert after.items


@pytest.mark.asyncio
async def test_invalid_settings_show_message_and_fall_back(workspace: Path):
    session = await start(
        workspace,
        workspace.parent / "papers.sqlite",
        "visual-studio-code",
        {"k": "many"},
        config={"contextChars": -5},
    )
    try:
        msgs = await session.wait_for(
            lambda: [
                m.message
                for m in session.client.messages
                if "'k'" in m.message or "contextChars" in m.message
            ],
            "showMessage",
        )
        await session.wait_for(
            lambda: len({m.message for m in session.client.messages}) >= 2, "both messages"
        )
        text = " ".join(m.message for m in session.client.messages)
        assert "'k' = 'many' is invalid" in text and "'contextChars' = -5 is invalid" in text, msgs
        assert all(m.type == types.MessageType.Warning for m in session.client.messages)
        uri = session.open("draft.tex")
        line, char = pos_of(DRAFT, r"ad-hoc retrieval \cite{")
        _first, result = await session.complete_until_full(uri, line, char)
        assert 0 < len(result.items) <= 20  # the default k
        # A valid change, announced by workspace/didChangeConfiguration, is pulled and applied.
        session.client.set_configuration({"k": 3}, section="citewise")
        session.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

        async def three() -> bool:
            _first, result = await session.complete_until_full(uri, line, char)
            return len(result.items) == 3

        await session.poll(three, "k = 3 to be applied")
    finally:
        await session.client.shutdown_session()
        await session.client.stop()


@pytest.mark.asyncio
async def test_watched_bib_edit_is_imported(vscode: Session):
    """A paper added to a workspace .bib becomes recommendable after didChangeWatchedFiles."""
    assert any(r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES for r in vscode.registrations)
    text = "Frobnication of quokka burrows has been studied at scale before \\cite{}.\n"
    (vscode.root / "quokka.tex").write_text(text)
    uri = vscode.open("quokka.tex", text)
    line, char = pos_of(text, r"before \cite{")
    before = await vscode.complete(uri, line, char)
    assert "quokka2024" not in {i.label for i in before.items}
    (vscode.root / "library.bib").write_text(
        "@inproceedings{quokka2024,\n  title = {Frobnication of Quokka Burrows at Scale},\n"
        "  author = {Marsupial, Quentin},\n  booktitle = {Proc. Zoo IR},\n  year = {2024}\n}\n"
    )
    vscode.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent(vscode.uri("library.bib"), types.FileChangeType.Created)]
        )
    )

    async def top_labels() -> list[str]:
        r = await vscode.complete(uri, line, char)
        return [i.label for i in r.items[:3]]

    async def imported() -> bool:
        return "quokka2024" in await top_labels()

    await vscode.poll(imported, "the watched .bib's paper to be recommended")
    # Deleting the file drops its papers from the store (no other source holds them).
    (vscode.root / "library.bib").unlink()
    vscode.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent(vscode.uri("library.bib"), types.FileChangeType.Deleted)]
        )
    )

    async def dropped() -> bool:
        return "quokka2024" not in await top_labels()

    await vscode.poll(dropped, "the deleted .bib's paper to leave the store")


@pytest.mark.asyncio
async def test_reindex_is_cancellable(vscode: Session):
    """Cancelled from the progress UI (window/workDoneProgress/cancel) or by $/cancelRequest;
    either way the old index keeps serving and a later reindex can run."""
    uri = vscode.open("draft.tex")
    line, char = pos_of(DRAFT, r"ad-hoc retrieval \cite{")
    reports = vscode.client.progress_reports

    async def begun(n: int) -> str:
        await vscode.wait_for(lambda: len(reports) >= n and reports[list(reports)[n - 1]], "progress begin")
        return list(reports)[n - 1]

    task = asyncio.ensure_future(
        vscode.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="citewise.reindex", arguments=[{"force": True}])
        )
    )
    token = await begun(1)
    vscode.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(task, TIMEOUT)
    assert result["done"] is False and result["cancelled"] is True and result["files"] < 10
    assert reports[token][-1].message == "cancelled"

    request = asyncio.ensure_future(
        vscode.client.protocol.send_request_async(
            types.WORKSPACE_EXECUTE_COMMAND,
            types.ExecuteCommandParams(command="citewise.reindex", arguments=[{"force": True}]),
            msg_id="reindex-2",
        )
    )
    token = await begun(2)
    vscode.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="reindex-2"))
    with pytest.raises(Exception, match="cancel"):
        await asyncio.wait_for(request, TIMEOUT)
    await vscode.wait_for(lambda: isinstance(reports[token][-1], types.WorkDoneProgressEnd), "progress end")
    result = await vscode.complete(uri, line, char)
    assert result.items  # the old index is still serving
    done = await asyncio.wait_for(
        vscode.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="citewise.reindex", arguments=[{}])
        ),
        TIMEOUT,
    )
    assert done["done"] is True


@pytest.mark.asyncio
async def test_code_action_creates_missing_bib(lsp: Session):
    """No .bib yet: VS Code gets CreateFile in the edit; Neovim 0.7 (no documentChanges) gets a
    command, and the server creates the file before its workspace/applyEdit."""
    (lsp.root / "refs.bib").unlink()
    uri = lsp.open("draft.tex")
    line, char = pos_of(DRAFT, r"without relevance judgements \cite{?")
    rng = types.Range(types.Position(line, char), types.Position(line, char))
    actions = await lsp.client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(uri), rng, types.CodeActionContext(diagnostics=[])
        )
    )
    cite = [a for a in actions if a.title.startswith("Cite: ")][0]
    bib_uri = lsp.uri("refs.bib")
    if lsp.caps == "visual-studio-code":
        assert any(isinstance(c, types.CreateFile) and c.uri == bib_uri for c in cite.edit.document_changes)
        draft_edit = next(
            c
            for c in cite.edit.document_changes
            if isinstance(c, types.TextDocumentEdit) and c.text_document.uri == uri
        )
        assert draft_edit.text_document.version == 1  # versioned against the open document
        return
    # On the wire this is a CodeAction {title, kind, command: {...}} without edit; the test client's
    # union structuring (CodeAction | Command) reads it as a Command whose ``command`` is the
    # stringified inner command. Real clients (Neovim checks ``type(action.command) == "table"``) do not.
    if isinstance(cite, types.Command):
        inner = ast.literal_eval(cite.command)
    else:
        assert cite.edit is None
        inner = {"command": cite.command.command, "arguments": cite.command.arguments}
    assert inner["command"] == "citewise.insertCitation"
    out = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=inner["command"], arguments=inner["arguments"])
    )
    assert out["applied"] is True and (lsp.root / "refs.bib").exists()
    edits = lsp.applied[-1].edit.changes
    key = edits[uri][0].new_text
    assert edits[bib_uri][0].new_text.startswith("@inproceedings{" + key + ",")
    assert edits[uri][0].range.start == types.Position(line, char - 1)  # replaces the "?"
