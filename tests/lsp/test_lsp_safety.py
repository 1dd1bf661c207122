"""Editor safety through the real server (pytest-lsp), on a small store the test builds itself.

Clients here behave like VS Code and Neovim: a workspace edit goes into a buffer and is NOT
saved, and no ``didOpen`` comes for a ``.bib`` buffer that an edit opened. The server must
account for the entries it sent (no duplicate, no false "missing key"), with the ``.bib``
open, unopened and missing; answer at once while a large ``.bib`` is still being indexed; say
what is wrong with the store; and exit when its editor is gone.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, client_capabilities

from citewise.indexer.store import Store

from ..conftest import server_command
from ..lsp_harness import INSERT, LATEX_DRAFT, Session, build_store, start, stop

DRAFT = LATEX_DRAFT


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    return build_store(tmp_path_factory.mktemp("store"))


Client = Session


@pytest_asyncio.fixture(params=["visual-studio-code", "neovim"])
async def editor(request, tmp_path: Path, small_store: Path):
    root = tmp_path / "ws"
    root.mkdir()
    session = await start(root, small_store, request.param)
    yield session
    await stop(session)


REFS = "@article{own2020,\n  title = {An Entry of My Own},\n  year = 2020\n}\n"


@pytest.mark.asyncio
@pytest.mark.parametrize("bib", ["open", "unopened", "missing"])
async def test_accepting_twice_before_saving_adds_one_entry(editor: Client, bib: str) -> None:
    bib_path = editor.root / "refs.bib"
    if bib != "missing":
        bib_path.write_text(REFS)
    if bib == "open":
        editor.open("refs.bib", REFS, "bibtex")
    uri = editor.open("draft.tex", DRAFT)
    first = await editor.complete(uri, "contrastive losses \\cite{")
    top = first.items[0]
    assert top.command is not None and top.command.command == INSERT  # not in the .bib yet
    await editor.accept(uri, "contrastive losses \\cite{", top)
    await editor.wait_for(lambda: editor.bib_edits, "the entry to be applied")
    assert bib_path.read_text() == ("" if bib == "missing" else REFS)  # nothing saved

    # The same paper, accepted again at the other placeholder before the .bib is saved.
    same: list[types.CompletionItem] = []
    for _ in range(200):
        second = await editor.complete(uri, "small world graphs \\cite{")
        same = [i for i in second.items if i.label == top.label]
        if same and same[0].command is None:
            break
        await asyncio.sleep(0.05)
    assert same, f"{top.label} not offered again"
    assert same[0].command is None, "the entry just added is offered as new again"
    await editor.accept(uri, "small world graphs \\cite{", same[0])
    entries = [e for e in editor.bib_edits if "@" in e]
    assert len(entries) == 1, entries
    assert re.search(r"@\w+\{" + re.escape(top.label) + ",", entries[0])

    # No "not in the bibliography" for the key just inserted, though the .bib is unsaved.
    def missing() -> list[types.Diagnostic] | None:
        diags = editor.client.diagnostics.get(uri)
        if diags is None:
            return None
        return [d for d in diags if isinstance(d.data, dict) and d.data.get("key") == top.label]

    # Poll for the publication of the latest version (debounced analysis runs in the background).
    await editor.wait_for(lambda: missing() == [], f"no 'missing' diagnostic for {top.label}", timeout=30)


@pytest.mark.asyncio
async def test_saving_without_the_entry_makes_it_new_again(editor: Client) -> None:
    """An undone, then saved, .bib no longer holds the entry: it is offered (and added) again."""
    bib_path = editor.root / "refs.bib"
    bib_path.write_text(REFS)
    uri = editor.open("draft.tex", DRAFT)
    top = (await editor.complete(uri, "contrastive losses \\cite{")).items[0]
    await editor.accept(uri, "contrastive losses \\cite{", top)
    await editor.wait_for(lambda: editor.bib_edits, "the entry")
    bib_path.write_text(REFS + "% edited and saved without the entry\n")
    editor.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent(editor.uri("refs.bib"), types.FileChangeType.Changed)]
        )
    )

    async def offered_as_new() -> bool:
        items = (await editor.complete(uri, "small world graphs \\cite{")).items
        return any(i.label == top.label and i.command is not None for i in items)

    for _ in range(200):
        if await offered_as_new():
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("a saved .bib without the entry still counts it as present")


@pytest.mark.asyncio
async def test_a_large_bib_does_not_hold_up_completion(editor: Client) -> None:
    """Completion answers while a 20,000-entry .bib is indexed; its keys join when ready."""
    entries = "".join(
        f"@article{{big{i},\n  title = {{Generated paper {i} on topic {i % 97}}},\n  year = {1990 + i % 30},\n"
        f"  abstract = {{{'Words of an abstract. ' * 20}}}\n}}\n\n"
        for i in range(20000)
    )
    (editor.root / "refs.bib").write_text(entries)
    uri = editor.open("draft.tex", DRAFT)
    first = await editor.complete(uri, "contrastive losses \\cite{")
    assert first.items, "no answer while the .bib is being indexed"
    text = editor.buffers[uri].replace("contrastive losses \\cite{}", "contrastive losses \\cite{big1234")
    editor.change(uri, text)

    async def own_key_offered() -> bool:
        items = (await editor.complete(uri, "contrastive losses \\cite{big1234")).items
        return any(i.label == "big1234" for i in items)

    for _ in range(1200):
        if await own_key_offered():
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the .bib's own key never joined the list")


@pytest.mark.asyncio
async def test_a_store_in_a_missing_folder_is_reported_with_the_fix(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    store = tmp_path / "no" / "such" / "dir" / "x.sqlite"
    cfg = ClientServerConfig(server_command=server_command("--store", str(store)))
    client = await cfg.start()
    messages = client.messages  # window/showMessage, as pytest-lsp records them
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"), root_uri=from_fs_path(str(root))
        )
    )
    t0 = time.monotonic()
    while not messages and time.monotonic() - t0 < 60:
        await asyncio.sleep(0.05)
    await client.shutdown_session()
    await client.stop()
    assert messages and messages[0].type == types.MessageType.Error
    assert str(store) in messages[0].message and "citewise index" in messages[0].message
    assert not store.parent.exists()  # no folders made for a mistyped path


@pytest.mark.asyncio
async def test_an_empty_store_is_a_warning_with_the_fix(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    store = tmp_path / "empty.sqlite"
    Store(store).close()
    session = await start(root, store, "neovim")
    await session.wait_for(lambda: session.client.messages, "a message")
    await session.client.shutdown_session()
    await session.client.stop()
    (msg,) = session.client.messages
    assert (
        msg.type == types.MessageType.Warning
        and "is empty" in msg.message
        and "citewise index" in msg.message
    )


def _rpc(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_the_server_exits_when_its_editor_is_gone(tmp_path: Path, small_store: Path) -> None:
    """``processId`` of ``initialize``: no orphan is left, whatever the server is doing."""
    editor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    server = subprocess.Popen(
        server_command("--store", str(small_store)),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        server.stdin.write(
            _rpc(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"processId": editor.pid, "rootUri": None, "capabilities": {}},
                }
            )
        )
        server.stdin.flush()  # stdin stays open: only the parent's death may end the server
        editor.kill()
        editor.wait()
        server.wait(timeout=60)
        assert server.returncode is not None
    finally:
        if server.poll() is None:
            server.kill()
        if editor.poll() is None:
            editor.kill()
        server.stdin.close()


def test_exit_code_when_stdin_closes_is_clean(small_store: Path) -> None:
    """Closing the pipe (an editor quitting without shutdown) ends the server too."""
    server = subprocess.Popen(
        server_command("--store", str(small_store)),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ},
    )
    server.stdin.close()
    server.wait(timeout=60)
    assert b"Traceback" not in server.stderr.read()


# -- on a real ACM-CR store ------------------------------------------------------------------------
# ~1,600 SIGIR and CHIIR papers (``lsp_store`` and the ``acm_*`` fixtures in conftest.py; skipped
# without ../shared/data), with the workspace's .bib files imported into the store (a user's setting).


@pytest_asyncio.fixture(loop_scope="module")
async def acm_importing(acm_workspace: Path):
    """A session with the opt-in workspace import on (``importWorkspaceBibs``): the workspace's
    .bib files are imported into the store, as ``citewise index`` would."""
    from ..lsp_harness import start_on_acm

    session = await start_on_acm(acm_workspace, options={"importWorkspaceBibs": True})
    yield session
    await stop(session)


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")  # the acm_* sessions run on the module's event loop
async def test_watched_bib_edit_is_imported(acm_importing: Client) -> None:
    """With the opt-in import, a paper added to a workspace .bib becomes recommendable after
    didChangeWatchedFiles, even to a draft that does not name that .bib; deleting the file drops its
    papers from the store (no other source holds them)."""
    acm_vscode = acm_importing
    assert any(r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES for r in acm_vscode.registrations)
    text = "Frobnication of quokka burrows has been studied at scale before \\cite{}.\n"
    (acm_vscode.root / "quokka.tex").write_text(text)
    uri = acm_vscode.open("quokka.tex", text)
    before = await acm_vscode.complete(uri, r"before \cite{")
    assert "quokka2024" not in {i.label for i in before.items}
    (acm_vscode.root / "library.bib").write_text(
        "@inproceedings{quokka2024,\n  title = {Frobnication of Quokka Burrows at Scale},\n"
        "  author = {Marsupial, Quentin},\n  booktitle = {Proc. Zoo IR},\n  year = {2024}\n}\n"
    )
    library = acm_vscode.uri("library.bib")
    acm_vscode.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(library, types.FileChangeType.Created)])
    )

    async def top_labels() -> list[str]:
        r = await acm_vscode.complete(uri, r"before \cite{")
        return [i.label for i in r.items[:3]]

    async def imported() -> bool:
        return "quokka2024" in await top_labels()

    await acm_vscode.poll(imported, "the watched .bib's paper to be recommended")
    (acm_vscode.root / "library.bib").unlink()
    acm_vscode.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(library, types.FileChangeType.Deleted)])
    )

    async def dropped() -> bool:
        return "quokka2024" not in await top_labels()

    await acm_vscode.poll(dropped, "the deleted .bib's paper to leave the store")


SECRET = "@article{secretkey2020,\n  title = {TOP SECRET TITLE},\n  year = {2020}\n}\n"


def _draft_naming(bib: str) -> str:
    return DRAFT.replace(r"\bibliography{refs}", r"\bibliography{" + bib + "}")


@pytest.mark.asyncio
async def test_links_out_of_the_workspace_are_neither_read_nor_written(
    tmp_path: Path, small_store: Path
) -> None:
    """The bad-input report's D1 and D10: a workspace .bib that is a symlink to a file outside, a
    dangling link, a link to /dev/zero, a FIFO, and insertCitation given a path outside: nothing
    outside is shown, read without bound, created or edited, and the server keeps answering."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.bib").write_text(SECRET)
    (outside / "victim.txt").write_text("IMPORTANT USER DATA\n")
    (root / "link.bib").symlink_to("../outside/secret.bib")
    (root / "victim.bib").symlink_to("../outside/victim.txt")
    (root / "dangling.bib").symlink_to("../outside/created_by_server.bib")
    (root / "zero.bib").symlink_to("/dev/zero")
    os.mkfifo(root / "fifo.bib")
    session = await start(root, small_store)
    try:
        for name in ("link", "victim", "dangling", "zero", "fifo"):
            uri = session.open(f"{name}.tex", _draft_naming(name))
            got = await session.complete(uri, "contrastive losses \\cite{")
            assert got.items and "secretkey2020" not in [i.label for i in got.items], name
            item = next(i for i in got.items if i.command is not None)
            (args,) = item.command.arguments or []
            # The entry goes to a bibliography inside the workspace (references.bib beside the
            # draft), never through the link.
            assert args["bib"] == str(root / "references.bib"), (name, args)
            for bib in (
                str(root / f"{name}.bib"),
                str(outside / "evil.bib"),
                "/dev/zero",
                "file:///etc/passwd",
            ):
                answer = await session.command(INSERT, {**args, "bib": bib})
                assert answer["applied"] is False and "may write" in answer["reason"], (name, bib, answer)
        assert not session.apply_requests
    finally:
        await stop(session)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.bib", "victim.txt"]
    assert (outside / "victim.txt").read_text() == "IMPORTANT USER DATA\n"
    assert not (root / "evil.bib").exists() and not list(root.glob("file:*"))
    store = Store(small_store)
    assert not [s for s in store.sources() if "outside" in s["path"]]
