"""Shared pytest-lsp harness for the end-to-end tests of the language server.

Everything goes through the real server (``citewise serve --store ...``) and the protocol;
nothing of the server is imported. The store is small and written by the test
(``examples/library.bib`` plus a few JSON Lines papers), so these tests run anywhere in
seconds, without ``../shared/data``. Each feature's module ends with a few tests on a real
ACM-CR store (``lsp_store`` in ``conftest.py``; the ``acm_*`` fixtures there start sessions on
it with :func:`start_on_acm`), which skip where the corpus is absent.

The client here behaves like VS Code and Neovim: a workspace edit goes into a buffer and is NOT
saved, and no ``didOpen`` comes for a ``.bib`` buffer that an edit opened. Every wait polls for
the state it needs, bounded by a generous timeout that only fails when the state never comes.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store

from .conftest import server_command

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
LIBRARY = EXAMPLES / "library.bib"
INSERT = "citewise.insertCitation"
SUGGEST = "citewise.suggestForDraft"
REINDEX = "citewise.reindex"
STATUS = "citewise.status"
CONTENT_MODIFIED = -32801
REQUEST_CANCELLED = -32800
TIMEOUT = 120.0  # generous: only a state that never comes reaches it

# Papers of a JSON Lines dump: no BibTeX text of their own, so the server *builds* their entries
# (key style and field preset apply), and a citation graph (``references``) for suggestForDraft.
JSONL_PAPERS: list[dict[str, Any]] = [
    {
        "id": "W1",
        "title": "Glacier Melt Forecasting with Recurrent Neural Networks",
        "authors": ["Okonkwo, Adaeze", "Lindqvist, Per"],
        "year": 2021,
        "venue": "Journal of Glaciology",
        "doi": "10.5555/glacier.2021.1",
        "type": "article",
        "publisher": "Cambridge University Press",
        "month": "mar",
        "abstract": "Forecasts daily glacier melt from temperature and radiation series with a recurrent "
        "neural network, outperforming degree-day models on alpine glaciers.",
        "references": ["W2", "W3"],
    },
    {
        "id": "W2",
        "title": "Degree-Day Models of Alpine Glacier Ablation",
        "authors": ["Hock, Regine"],
        "year": 2003,
        "venue": "Journal of Hydrology",
        "type": "article",
        "abstract": "Reviews temperature-index (degree-day) models of snow and ice melt on alpine glaciers "
        "and their melt factors.",
    },
    {
        "id": "W3",
        "title": "Surface Energy Balance of Debris-Covered Glaciers",
        "authors": ["Reid, Tim", "Brock, Ben"],
        "year": 2010,
        "venue": "Journal of Glaciology",
        "type": "article",
        "abstract": "Measures the surface energy balance under supraglacial debris layers and its effect "
        "on ablation rates of glaciers.",
    },
    {
        "id": "W4",
        "title": "Sea Ice Thickness Retrieval from Satellite Altimetry",
        "authors": ["Laxon, Seymour"],
        "year": 2013,
        "venue": "Geophysical Research Letters",
        "type": "article",
        "abstract": "Retrieves Arctic sea ice thickness from radar altimeter freeboard measurements.",
    },
]


def write_jsonl(folder: Path, papers: list[dict[str, Any]] = JSONL_PAPERS) -> Path:
    path = folder / "papers.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in papers), encoding="utf-8")
    return path


def build_store(folder: Path, sources: list[Path] | None = None, *, with_jsonl: bool = False) -> Path:
    """A small store (the example library; with ``with_jsonl`` the JSON Lines papers too) imported in-process."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "papers.sqlite"
    store = Store(path)
    srcs = [str(s) for s in (sources if sources is not None else [LIBRARY])]
    if with_jsonl:
        srcs.append(str(write_jsonl(folder)))
    import_sources(store, srcs)
    assert store.count() > 0
    store.close()
    return path


def index_with_cli(folder: Path, sources: list[Path]) -> tuple[Path, dict]:
    """A store built by the public CLI (``citewise index --embed --json``): it embeds the papers with
    the shipped dense model and builds the ANN index next to the store."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "papers.sqlite"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "citewise.cli",
            "index",
            *map(str, sources),
            "--store",
            str(path),
            "--json",
            "--quiet",
            "--embed",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return path, json.loads(proc.stdout.strip().splitlines()[-1])


def position(text: str, needle: str, after: bool = True) -> types.Position:
    """The position just after (or at the start of) the first ``needle`` in ``text`` (UTF-16 columns)."""
    i = text.index(needle) + (len(needle) if after else 0)
    line_start = text.rfind("\n", 0, i) + 1
    return types.Position(text.count("\n", 0, i), len(text[line_start:i].encode("utf-16-le")) // 2)


class Session:
    """A pytest-lsp client that keeps applied edits in memory, as an unsaved buffer would, and
    records every diagnostics publication with its version."""

    def __init__(self, client: LanguageClient, root: Path, caps: str) -> None:
        self.client, self.root, self.caps = client, root, caps
        self.init_result: types.InitializeResult | None = None  # what the server announced
        self.buffers: dict[str, str] = {}  # uri -> text of documents open in the "editor"
        self.open_docs: set[str] = set()
        self.versions: dict[str, int] = {}
        self.bib_edits: list[str] = []  # every text inserted into a .bib
        self.applied: list[types.WorkspaceEdit] = []  # by the server's applyEdit or the test's apply()
        self.apply_requests: list[types.ApplyWorkspaceEditParams] = []  # what the server sent, as sent
        self.registrations: list[types.Registration] = []  # client/registerCapability (file watchers)
        self.publications: list[types.PublishDiagnosticsParams] = []

    # -- documents ----------------------------------------------------------------------------
    def uri(self, name: str) -> str:
        return from_fs_path(str(self.root / name))

    def open(self, name: str, text: str | None = None, lang: str = "latex") -> str:
        """Open ``name`` in the editor with ``text``, or with the file's text on disk when not given."""
        uri = self.uri(name)
        if text is None:
            text = (self.root / name).read_text()
        self.buffers[uri], self.versions[uri] = text, 1
        self.open_docs.add(uri)
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, lang, 1, text))
        )
        return uri

    def change(self, uri: str, text: str) -> int:
        self.buffers[uri] = text
        self.versions[uri] += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=self.versions[uri], uri=uri),
                [types.TextDocumentContentChangeWholeDocument(text)],
            )
        )
        return self.versions[uri]

    def apply(self, edit: types.WorkspaceEdit) -> None:
        """Apply to buffers (loading a file into one when needed), never to disk -- but create
        files a CreateFile asks for, as VS Code does."""
        self.applied.append(edit)
        changes: list[tuple[str, list[types.TextEdit]]] = []
        for c in edit.document_changes or []:
            if isinstance(c, types.CreateFile):
                path = Path(c.uri.removeprefix("file://"))
                if not path.exists():
                    path.write_text("")
            elif isinstance(c, types.TextDocumentEdit):
                changes.append((c.text_document.uri, list(c.edits)))
        changes += list((edit.changes or {}).items())
        for uri, edits in changes:
            path = Path(uri.removeprefix("file://"))
            text = self.buffers.get(uri)
            if text is None:
                text = path.read_text() if path.exists() else ""
            for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
                lines = text.split("\n")
                start = sum(len(x) + 1 for x in lines[: e.range.start.line]) + e.range.start.character
                end = sum(len(x) + 1 for x in lines[: e.range.end.line]) + e.range.end.character
                text = text[:start] + e.new_text + text[end:]
                if uri.endswith(".bib"):
                    self.bib_edits.append(e.new_text)
            self.buffers[uri] = text
            if uri in self.open_docs:
                self.change(uri, text)

    # -- waiting ------------------------------------------------------------------------------
    async def wait_for(self, predicate: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            value = predicate()
            if value:
                return value
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    async def poll(self, ask: Callable[[], Awaitable[Any]], what: str, timeout: float = TIMEOUT) -> Any:
        """Ask the server again and again until the answer is truthy (returned)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            value = await ask()
            if value:
                return value
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    def diagnostics(self, uri: str) -> list[types.Diagnostic] | None:
        got = self.client.diagnostics.get(uri)
        return None if got is None else list(got)

    async def latest_diagnostics(self, uri: str, timeout: float = TIMEOUT) -> list[types.Diagnostic]:
        """The diagnostics published for the buffer's current version (waits for them)."""
        version = self.versions[uri]
        pub = await self.wait_for(
            lambda: next(
                (p for p in reversed(self.publications) if p.uri == uri and p.version == version), None
            ),
            f"diagnostics of version {version}",
            timeout,
        )
        return list(pub.diagnostics)

    # -- requests -----------------------------------------------------------------------------
    async def complete(self, uri: str, needle: str) -> types.CompletionList:
        result = await self.client.text_document_completion_async(
            types.CompletionParams(types.TextDocumentIdentifier(uri), position(self.buffers[uri], needle))
        )
        assert isinstance(result, types.CompletionList), result
        return result

    async def complete_when(
        self,
        uri: str,
        needle: str,
        ok: Callable[[types.CompletionList], bool],
        what: str,
        timeout: float = TIMEOUT,
    ) -> types.CompletionList:
        async def ask() -> types.CompletionList | None:
            got = await self.complete(uri, needle)
            return got if ok(got) else None

        return await self.poll(ask, what, timeout)

    async def complete_final(self, uri: str, needle: str) -> types.CompletionList:
        """The complete (reranked, when ``rerank`` is on) list: ask until ``isIncomplete`` is false."""
        return (await self.complete_until_full(uri, needle))[1]

    async def complete_until_full(
        self, uri: str, needle: str
    ) -> tuple[types.CompletionList, types.CompletionList]:
        """The first answer and the first complete one (``isIncomplete`` false; the same list when
        the first is complete): a test of the fast-then-reranked protocol needs both."""
        first = await self.complete(uri, needle)
        if not first.is_incomplete:
            return first, first
        return first, await self.complete_when(
            uri, needle, lambda r: not r.is_incomplete, "the complete list"
        )

    async def accept(self, uri: str, needle: str, item: types.CompletionItem) -> None:
        """What an editor does on accepting an item: its text edit, then its command."""
        text = self.buffers[uri]
        e = item.text_edit
        lines = text.split("\n")
        start = sum(len(x) + 1 for x in lines[: e.range.start.line]) + e.range.start.character
        end = sum(len(x) + 1 for x in lines[: e.range.end.line]) + e.range.end.character
        self.change(uri, text[:start] + e.new_text + text[end:])
        if item.command is not None:
            await self.command(item.command.command, *(item.command.arguments or []))

    def send(self, method: str, params: Any, msg_id: str | None = None) -> asyncio.Future:
        """Send a request now and return the future of its answer. (pytest-lsp's
        ``protocol.send_request_async`` is a coroutine: it sends nothing until awaited, so a
        notification sent meanwhile, a change or a ``$/cancelRequest``, would arrive first.)"""
        return asyncio.wrap_future(self.client.protocol.send_request(method, params, msg_id=msg_id))

    async def command(self, name: str, *args: Any) -> Any:
        return await self.client.workspace_execute_command_async(types.ExecuteCommandParams(name, list(args)))

    async def status(self) -> dict:
        return await self.command(STATUS)

    async def code_actions(
        self, uri: str, needle: str, diagnostics: list[types.Diagnostic] | None = None
    ) -> list[types.CodeAction]:
        """The code actions at the end of ``needle``."""
        pos = position(self.buffers[uri], needle)
        got = await self.client.text_document_code_action_async(
            types.CodeActionParams(
                types.TextDocumentIdentifier(uri),
                types.Range(pos, pos),
                types.CodeActionContext(diagnostics or []),
            )
        )
        return [a for a in got or [] if isinstance(a, types.CodeAction)]

    async def hover(self, uri: str, needle: str) -> types.Hover | None:
        return await self.client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), position(self.buffers[uri], needle))
        )

    async def definition(self, uri: str, needle: str) -> Any:
        return await self.client.text_document_definition_async(
            types.DefinitionParams(types.TextDocumentIdentifier(uri), position(self.buffers[uri], needle))
        )

    def configure(self, settings: dict[str, Any]) -> None:
        """New settings, as VS Code sends them: workspace/configuration answers them, and a
        didChangeConfiguration says they changed."""
        self.client.set_configuration(settings, section="citewise")
        self.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"citewise": settings})
        )

    def shown(self) -> list[str]:
        return [m.message for m in self.client.messages]


def read_code_actions_like_editors(client: LanguageClient) -> None:
    """Tell a ``Command`` from a ``CodeAction`` as VS Code and Neovim do (``command`` is a string).

    lsprotocol's own hook reads any object with a ``command`` member as a Command, which turns
    a code action carrying both an edit and a follow-up command into a bare Command.
    """
    from typing import Union

    conv = client.protocol._converter

    def hook(obj, _t):
        is_command = isinstance(obj.get("command"), str)
        return conv.structure(obj, types.Command if is_command else types.CodeAction)

    conv.register_structure_hook(Union[types.Command, types.CodeAction], hook)  # noqa: UP007 (the key lsprotocol uses)


def error_code(exc: BaseException) -> int | None:
    return getattr(exc, "code", None) if isinstance(exc, JsonRpcException) else None


def edit_texts(edit: types.WorkspaceEdit) -> dict[str, list[str]]:
    """The new texts of a workspace edit by document, from ``documentChanges`` and ``changes``
    alike: what a test compares without caring which form the client's capabilities got."""
    out: dict[str, list[str]] = {}
    for c in edit.document_changes or []:
        if isinstance(c, types.TextDocumentEdit):
            out.setdefault(c.text_document.uri, []).extend(e.new_text for e in c.edits)
    for uri, edits in (edit.changes or {}).items():
        out.setdefault(uri, []).extend(e.new_text for e in edits)
    return out


# What the harness's sessions start with unless told otherwise: a short debounce, and no import of
# the workspace's .bib files into the store (a test of that import asks for it).
DEFAULT_OPTIONS: dict[str, Any] = {"debounceMs": 20, "importWorkspaceBibs": False}


async def start(
    root: Path,
    store: Path | None,
    caps: str = "visual-studio-code",
    *,
    options: dict[str, Any] | None = None,
    configuration: dict[str, Any] | None = None,
    ready: bool = True,
    command: list[str] | None = None,
    base_options: dict[str, Any] = DEFAULT_OPTIONS,
) -> Session:
    """Start the server on ``store`` for the workspace ``root`` and initialize it.

    ``options`` are the initializationOptions, merged over ``base_options`` (default: a short
    debounce and no workspace .bib import); ``configuration`` is what workspace/configuration
    answers for the section ``citewise``. With ``ready``, waits for the server's "citewise ready"
    log. ``command`` replaces ``citewise serve`` (another install's console script)."""
    store_args = ["--store", str(store)] if store is not None else []
    cmd = [*command, *store_args] if command else server_command(*store_args)
    client = await ClientServerConfig(server_command=cmd).start()
    read_code_actions_like_editors(client)
    session = Session(client, root, caps)
    if configuration is not None:
        client.set_configuration(configuration, section="citewise")
    answer_like_an_editor(client, session)
    init = {**base_options, **(options or {})}
    session.init_result = await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities(caps),
            root_uri=from_fs_path(str(root)),
            workspace_folders=[types.WorkspaceFolder(from_fs_path(str(root)), "ws")],
            initialization_options=init,
        )
    )
    if ready:
        await session.wait_for(
            lambda: server_exited(client) or any("citewise ready" in m.message for m in client.log_messages),
            "the server",
        )
        assert not server_exited(client), "the server exited at start (see its stderr above)"
    return session


def answer_like_an_editor(client: LanguageClient, session: Session) -> None:
    """The client's side of the server's requests, recorded on ``session``: capability
    registrations are accepted, workspace edits go into buffers (unsaved), and every diagnostics
    publication is kept with its version (pytest-lsp keeps only the latest, without it)."""

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        session.registrations.extend(params.registrations)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        session.apply_requests.append(params)
        session.apply(params.edit)
        return types.ApplyWorkspaceEditResult(applied=True)

    features = client.protocol.fm.features
    publish = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def record(params: types.PublishDiagnosticsParams) -> None:
        session.publications.append(params)
        publish(params)

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = record


def server_exited(client: LanguageClient) -> bool:
    proc = getattr(client, "_server", None)
    return proc is not None and proc.returncode is not None


async def stop(session: Session) -> None:
    await session.client.shutdown_session()
    await session.client.stop()


LATEX_DRAFT = r"""\documentclass{article}
\title{Learning to rank citations}
\begin{document}
Dense retrieval encodes queries and documents with a dual encoder trained with contrastive losses \cite{}.
Approximate nearest neighbour search uses navigable small world graphs \cite{}.
\bibliography{refs}
\end{document}
"""


# -- a real ACM-CR store (``lsp_store`` and the ``acm_*`` fixtures in conftest.py) ------------------

# A user's setting but for a 50 ms debounce: the workspace's .bib files ARE imported into the store
# (the tests of watched .bib files need it), so every session gets its own copy of the store.
ACM_OPTIONS: dict[str, Any] = {"debounceMs": 50}

ACM_DRAFT = r"""\documentclass{article}
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

ACM_REFS = """@article{foo2020,
  title = {A Foo Paper About Nothing In Particular},
  author = {Foo, Bar},
  year = {2020}
}
"""


def make_acm_workspace(base: Path, store: Path, *, draft: bool = True) -> Path:
    """``base/ws`` with ``refs.bib`` (and ``draft.tex`` unless told not), and a private copy of the
    store beside it as ``base/papers.sqlite``: the server imports the workspace's .bib into its
    store, which must not leak into the store other tests share."""
    ws = base / "ws"
    ws.mkdir(parents=True)
    if draft:
        (ws / "draft.tex").write_text(ACM_DRAFT)
    (ws / "refs.bib").write_text(ACM_REFS)
    for f in store.parent.iterdir():
        (shutil.copy if f.is_file() else shutil.copytree)(f, base / f.name)
    return ws


async def start_on_acm(
    ws: Path,
    caps: str = "visual-studio-code",
    *,
    options: dict[str, Any] | None = None,
    configuration: dict[str, Any] | None = None,
) -> Session:
    """A session on the store copy that :func:`make_acm_workspace` put beside ``ws``, with
    :data:`ACM_OPTIONS` under ``options``."""
    return await start(
        ws,
        ws.parent / "papers.sqlite",
        caps,
        options=options,
        configuration=configuration,
        base_options=ACM_OPTIONS,
    )
