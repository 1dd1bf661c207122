"""Every setting of ``citewise/settings.py`` (docs/language-server.md, "Settings"), exercised
through the real server: from initializationOptions, workspace/configuration and
didChangeConfiguration; a bad value is a ``window/showMessage`` and the default is kept.

The stores are small and written here. One of them is built by ``citewise index`` (the public
CLI), which embeds the papers with the shipped dense model (``models/dense``) and writes the
ANN index next to the store, so ``prefetch`` = ``dense`` / ``hybrid`` run the real model
(``hatten``, the old name of ``dense``, still works for a release, with one notice).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.uris import from_fs_path

from ..lsp_harness import (
    INSERT,
    JSONL_PAPERS,
    LIBRARY,
    Session,
    build_store,
    index_with_cli,
    start,
    start_on_acm,
    stop,
    write_jsonl,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

DENSE = "A dual encoder of questions and passages trained with in-batch negatives retrieves passages for open-domain question answering"
GLACIER = "Recurrent neural networks forecast daily glacier melt from temperature series better than degree-day models"


def latex(sentence: str, bib: str | None = None, cite: str = "\\cite{}") -> str:
    tail = f"\\bibliography{{{bib}}}\n" if bib else ""
    return f"\\documentclass{{article}}\n\\begin{{document}}\n{sentence} {cite}.\n{tail}\\end{{document}}\n"


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    return build_store(tmp_path_factory.mktemp("small"), with_jsonl=True)


@pytest.fixture(scope="module")
def dense_store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dense")
    store, summary = index_with_cli(folder, [LIBRARY, write_jsonl(folder)])
    papers = 22 + len(JSONL_PAPERS)
    assert summary["imported"] == papers
    assert summary["embedding"]["embedded"] == papers and summary["embedding"]["valid"] == papers, summary
    assert (store.parent / (store.name + ".dense") / "meta.json").is_file()  # the ANN index
    return store


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp(tmp_path_factory, dense_store: Path) -> Session:
    """The server most settings are changed on, with didChangeConfiguration."""
    root = tmp_path_factory.mktemp("ws")
    session = await start(root, dense_store, "visual-studio-code")
    yield session
    await stop(session)


async def labels(lsp: Session, uri: str, needle: str = "\\cite{") -> list[str]:
    """The complete list (with ``rerank`` on: once the full ranking is served)."""
    return [i.label for i in (await lsp.complete_final(uri, needle)).items]


WORD_VECTORS = "We learn vectors for words from global co-occurrence counts"


async def test_prefetch_dense_and_hybrid_run_the_shipped_model(lsp: Session) -> None:
    sentence = WORD_VECTORS
    got = {}
    for mode in ("bm25", "dense", "hybrid"):
        lsp.configure({"prefetch": mode, "k": 25, "debounceMs": 20})
        uri = lsp.open(f"prefetch-{mode}.tex", latex(sentence))  # a new draft: no cached list
        got[mode] = await labels(lsp, uri)
    assert got["bm25"] and got["dense"] and got["hybrid"]
    assert got["dense"] != got["bm25"]
    assert got["hybrid"] != got["bm25"]
    # BM25 finds only papers sharing words with the sentence; the dense model ranks them all.
    assert set(got["dense"]) - set(got["bm25"]), got
    assert len(got["dense"]) == 25
    assert not lsp.shown(), lsp.shown()


async def test_prefetch_hatten_the_old_name_of_dense_still_works_with_one_notice(
    tmp_path: Path, dense_store: Path
) -> None:
    """Until the next release, a user's ``"prefetch": "hatten"`` ranks as ``dense`` does; the user
    is told once (window/showMessage), however often the settings are sent again."""
    root = tmp_path / "ws"
    root.mkdir()
    session = await start(root, dense_store, options={"prefetch": "hatten", "k": 25})
    try:
        old = await labels(session, session.open("old.tex", latex(WORD_VECTORS)))
        session.configure({"prefetch": "hatten", "k": 25})  # sent again, as editors do
        again = await labels(session, session.open("again.tex", latex(WORD_VECTORS)))
        session.configure({"prefetch": "dense", "k": 25})
        new = await labels(session, session.open("new.tex", latex(WORD_VECTORS)))
        # The same papers as `dense` (the reranker, on a time budget, may order the head differently;
        # a rejected value would have fallen back to `auto`, which fuses BM25 in here).
        assert len(old) == 25 and set(old) == set(again) == set(new), (old, again, new)
        notices = [m for m in session.shown() if "deprecated" in m]
        assert notices == [
            "citewise: setting 'prefetch' = 'hatten' is deprecated, use 'dense' instead "
            "(the old name still works in this release)"
        ], session.shown()
    finally:
        await stop(session)


async def test_prefetch_dense_without_an_index_is_not_silently_incomplete(
    tmp_path: Path, small_store: Path
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    session = await start(root, small_store, options={"prefetch": "dense"})
    try:
        uri = session.open("a.tex", latex(DENSE))
        first = await session.complete(uri, "\\cite{")
        assert first.items  # the fast list (BM25) answers

        async def idle() -> bool:  # the full ranking it scheduled has run (or failed)
            status = await session.status()
            return status["queuedRankings"] == 0 and status["pendingAnalyses"] == 0

        await session.poll(idle, "the scheduled ranking to run")
        again = await session.complete(uri, "\\cite{")
        told = [m for m in session.shown() if "dense" in m.lower()]
        assert told or not again.is_incomplete, "incomplete forever, and the user is not told why"
    finally:
        await stop(session)


async def test_k_is_the_number_of_suggestions(lsp: Session) -> None:
    for k in (3, 7):
        lsp.configure({"k": k, "prefetch": "bm25"})
        uri = lsp.open(f"k{k}.tex", latex(DENSE))
        assert len(await labels(lsp, uri)) == k
        diags = await lsp.latest_diagnostics(uri)
        assert diags[0].message.startswith(f"{k} suggestions")


async def test_candidates_is_the_depth_what_is_typed_is_looked_for_in(lsp: Session) -> None:
    """``laxon2013sea`` is 6th for the dense-retrieval sentence (fast list): typing its key
    finds it with 200 candidates, not with 3."""
    lsp.configure({"rerank": False, "candidates": 200})
    full = await labels(lsp, lsp.open("depth.tex", latex(DENSE)))
    assert 3 < full.index("laxon2013sea") < 20, full
    uri = lsp.open("depth-typed.tex", latex(DENSE, cite="\\cite{laxon}"))
    assert await labels(lsp, uri, "\\cite{laxon") == ["laxon2013sea"]
    lsp.configure({"rerank": False, "candidates": 3})
    lsp.change(uri, latex(DENSE, cite="\\cite{laxo}"))
    assert await labels(lsp, uri, "\\cite{laxo") == []
    lsp.configure({"rerank": False, "candidates": 200})
    lsp.change(uri, latex(DENSE, cite="\\cite{laxon}"))
    assert await labels(lsp, uri, "\\cite{laxon") == ["laxon2013sea"]


async def test_rerank_off_answers_complete_at_once_and_on_serves_the_full_ranking_next(lsp: Session) -> None:
    lsp.configure({"rerank": False})
    first = await lsp.complete(lsp.open("rerank-off.tex", latex(DENSE)), "\\cite{")
    assert first.items and first.is_incomplete is False
    # With a long debounce nothing ranks ahead of the first request: it gets the fast list,
    # incomplete, and the client's next request the full ranking.
    lsp.configure({"rerank": True, "debounceMs": 10000})
    uri = lsp.open("rerank-on.tex", latex(DENSE))
    first = await lsp.complete(uri, "\\cite{")
    assert first.items and first.is_incomplete is True
    final = await lsp.complete_final(uri, "\\cite{")
    assert final.items and final.is_incomplete is False
    lsp.configure({"debounceMs": 20})


async def test_budget_lets_code_actions_wait_for_the_full_ranking(lsp: Session) -> None:
    lsp.configure({"rerank": True, "budgetMs": 60000, "debounceMs": 10000, "k": 5})
    uri = lsp.open("budget.tex", latex(GLACIER))
    actions = await lsp.code_actions(uri, "\\cite{")  # nothing ranked ahead: it waits for the ranking
    full = await labels(lsp, uri)
    assert [_draft_key(a) for a in actions] == full[: len(actions)]
    lsp.configure({"rerank": True, "budgetMs": 0, "debounceMs": 10000, "k": 5})
    actions = await lsp.code_actions(lsp.open("budget0.tex", latex(GLACIER + " again")), "\\cite{")
    assert len(actions) == 5  # the fast list when the ranking is not ready at once
    lsp.configure({"debounceMs": 20})


async def test_context_chars_bounds_the_local_context(lsp: Session) -> None:
    """A long sentence about glaciers that ends on dense passage retrieval: 20 characters see
    only its end."""
    sentence = (
        GLACIER + " and degree-day models of alpine glacier ablation under debris, "
        "while for the text side we rely on dense passage retrieval"
    )
    lsp.configure({"rerank": False, "contextChars": 400})
    uri = lsp.open("context.tex", latex(sentence))
    wide = await labels(lsp, uri)
    lsp.configure({"rerank": False, "contextChars": 20})
    lsp.change(uri, latex(sentence) + "% narrow\n")
    narrow = await labels(lsp, uri)
    assert wide[0] in {"okonkwo2021glacier", "hock2003degree", "reid2010surface"}, wide
    assert narrow[0] == "karpukhin2020dense", narrow
    lsp.configure({"contextChars": 400})


def _action_for(actions: list[types.CodeAction], title: str) -> types.CodeAction:
    (action,) = [a for a in actions if a.title.startswith(f"Cite: {title}")]
    return action


def _draft_key(action: types.CodeAction) -> str:
    """The key the action puts into the draft."""
    (edit,) = [
        e
        for c in action.edit.document_changes or []
        if isinstance(c, types.TextDocumentEdit) and c.text_document.uri.endswith(".tex")
        for e in c.edits
    ]
    return edit.new_text


def _bib_text(action: types.CodeAction) -> str:
    return "".join(
        e.new_text
        for c in action.edit.document_changes or []
        if isinstance(c, types.TextDocumentEdit) and c.text_document.uri.endswith(".bib")
        for e in c.edits
    )


async def test_key_style_names_built_entries_and_keeps_the_users_keys(lsp: Session) -> None:
    expected = {
        "lastnameYEARfirstword": "okonkwo2021glacier",
        "authoryear": "okonkwo2021",
        "acl": "okonkwo-lindqvist-2021-glacier",
        "Lastname_yy": "Okonkwo_21",
    }
    for style, key in expected.items():
        lsp.configure({"keyStyle": style, "rerank": False})
        uri = lsp.open(f"style-{style}.tex", latex(GLACIER + " as " + DENSE, bib=f"style-{style}"))
        items = (await lsp.complete(uri, "\\cite{")).items
        got = {i.label for i in items}
        assert key in got, (style, got)
        assert "karpukhin2020dense" in got  # an entry of the user's own library keeps its key
        item = next(i for i in items if i.label == key)
        assert item.text_edit.new_text == key and item.command is not None and item.command.command == INSERT
        action = _action_for(await lsp.code_actions(uri, "\\cite{"), "Glacier Melt Forecasting")
        assert _draft_key(action) == key and _bib_text(action).lstrip().startswith(f"@article{{{key},")
    lsp.configure({})


async def test_bib_fields_choose_what_an_inserted_entry_carries(lsp: Session) -> None:
    entries = {}
    for preset in ("minimal", "standard", "full"):
        lsp.configure({"bibFields": preset})
        uri = lsp.open(f"fields-{preset}.tex", latex(GLACIER, bib=f"fields-{preset}"))
        entries[preset] = _bib_text(
            _action_for(await lsp.code_actions(uri, "\\cite{"), "Glacier Melt Forecasting")
        )
    for preset, entry in entries.items():
        assert "@article{okonkwo2021glacier," in entry and "doi = {10.5555/glacier.2021.1}" in entry, (
            preset,
            entry,
        )
    assert "abstract" not in entries["minimal"] and "publisher" not in entries["minimal"]
    assert (
        "abstract" not in entries["standard"]
        and "publisher = {Cambridge University Press}" in entries["standard"]
    )
    assert "abstract = {Forecasts daily glacier melt" in entries["full"]
    lsp.configure({})


async def test_debounce_delays_the_analysis(lsp: Session) -> None:
    lsp.configure({"debounceMs": 10000})
    uri = lsp.open("debounce.tex", latex(DENSE))
    status = await lsp.status()
    assert status["pendingAnalyses"] >= 1  # waiting out the 10 s
    assert not [p for p in lsp.publications if p.uri == uri]
    lsp.configure({"debounceMs": 0})  # re-schedules the open documents with the new delay
    assert await lsp.latest_diagnostics(uri)


async def test_bibliography_for_drafts_that_declare_none_and_configuration_at_start(
    tmp_path: Path, small_store: Path
) -> None:
    mine = tmp_path / "elsewhere" / "mine.bib"
    mine.parent.mkdir()
    mine.write_text(
        "@inproceedings{myDPR,\n  title = {Dense Passage Retrieval for Open-Domain Question Answering},\n"
        "  year = {2020}\n}\n"
    )
    root = tmp_path / "ws"
    root.mkdir()
    # Also: workspace/configuration (k = 4) is read at start and wins over initializationOptions.
    session = await start(
        root,
        small_store,
        options={"bibliography": [str(mine)], "rerank": False, "k": 9},
        configuration={"k": 4},
    )
    try:
        uri = session.open("nobib.tex", latex(DENSE))
        assert len((await session.complete(uri, "\\cite{")).items) == 4
        result = await session.complete_when(
            uri, "\\cite{", lambda r: r.items and r.items[0].label == "myDPR", "the setting's .bib key"
        )
        assert result.items[0].command is None  # already in that .bib
        session.change(uri, latex(DENSE, cite="\\cite{myDPR}"))
        loc = await session.definition(uri, "\\cite{my")
        assert isinstance(loc, types.Location) and loc.uri == from_fs_path(str(mine))
        declared = session.open("declared.tex", latex(DENSE, bib="refs"))  # a draft naming its own .bib
        top = (await session.complete(declared, "\\cite{")).items[0]
        assert top.label == "karpukhin2020dense" and top.command is not None
    finally:
        await stop(session)


async def test_a_changed_bibliography_setting_applies_to_open_drafts(lsp: Session) -> None:
    mine = lsp.root / "setting.bib"
    mine.write_text(
        "@inproceedings{myDPR,\n  title = {Dense Passage Retrieval for Open-Domain Question Answering},\n"
        "  year = {2020}\n}\n"
    )
    lsp.configure({"rerank": False})
    # A draft naming that .bib gets it indexed (in the background) first.
    declared = lsp.open("declares-setting.tex", latex(DENSE, bib="setting"))
    await lsp.complete_when(declared, "\\cite{", lambda r: r.items[0].label == "myDPR", "the .bib indexed")
    uri = lsp.open("changed-bib.tex", latex(DENSE))
    assert (await lsp.complete(uri, "\\cite{")).items[0].label == "karpukhin2020dense"
    await lsp.latest_diagnostics(uri)
    published = len(lsp.publications)
    lsp.configure({"rerank": False, "bibliography": [str(mine)]})
    # The server re-analyses open drafts after a settings change: wait for that publication.
    await lsp.wait_for(lambda: [p for p in lsp.publications[published:] if p.uri == uri], "the re-analysis")
    labels = [i.label for i in (await lsp.complete(uri, "\\cite{")).items]
    lsp.configure({})
    assert labels[0] == "myDPR", labels[:3]


async def test_store_setting_overrides_the_command_line(tmp_path: Path, small_store: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    other_store = build_store(other, [write_jsonl(other)])  # the glacier papers only
    root = tmp_path / "ws"
    root.mkdir()
    session = await start(root, small_store, options={"store": str(other_store), "rerank": False})
    try:
        status = await session.status()
        assert Path(status["store"]) == other_store and status["papers"] == len(JSONL_PAPERS)
        got = {
            i.label for i in (await session.complete(session.open("s.tex", latex(GLACIER)), "\\cite{")).items
        }
        assert got and got <= {"okonkwo2021glacier", "hock2003degree", "reid2010surface", "laxon2013sea"}
        # Changed with didChangeConfiguration: the other store is opened and swapped in.
        session.configure({"store": str(small_store), "rerank": False})

        async def swapped() -> bool:
            status = await session.status()
            return Path(status["store"]) == small_store and status["papers"] == 22 + len(JSONL_PAPERS)

        await session.poll(swapped, "the store of the new setting")
        labels = [
            i.label for i in (await session.complete(session.open("s2.tex", latex(DENSE)), "\\cite{")).items
        ]
        assert labels[0] == "karpukhin2020dense", labels
    finally:
        await stop(session)
    missing = tmp_path / "no" / "such" / "folder" / "x.sqlite"
    session = await start(root, small_store, options={"store": str(missing)}, ready=False)
    try:
        msg = await session.wait_for(lambda: session.client.messages, "a message")
        assert msg[0].type == types.MessageType.Error and str(missing) in msg[0].message
        assert not missing.parent.exists()
    finally:
        await stop(session)


@pytest.mark.parametrize("on", [True, False])
async def test_import_workspace_bibs(tmp_path: Path, on: bool) -> None:
    """A workspace .bib's papers become candidates only when the setting is on. The draft is
    opened before the store is loaded and the first analysis waits 10 s, so its first
    diagnostics come from the analysis the server runs after the workspace import."""
    root = tmp_path / "ws"
    root.mkdir()
    small_store = build_store(tmp_path / "store", with_jsonl=True)  # the import writes into the store
    (root / "lab.bib").write_text(
        "@article{zz2019enzyme,\n  title = {Quantum Tunnelling in Enzyme Catalysis},\n"
        "  author = {Scrutton, Nigel},\n  year = {2019}\n}\n"
    )
    session = await start(
        root,
        small_store,
        options={"importWorkspaceBibs": on, "rerank": False, "debounceMs": 10000},
        ready=False,
    )
    try:
        uri = session.open("enzyme.tex", latex("Hydrogen tunnelling drives enzyme catalysis"))
        await session.wait_for(
            lambda: [p for p in session.publications if p.uri == uri], "the first analysis"
        )
        got = [i.label for i in (await session.complete(uri, "\\cite{")).items]
        papers = (await session.status())["papers"]
        if on:
            assert got[:1] == ["zz2019enzyme"] and papers == 22 + len(JSONL_PAPERS) + 1, got
        else:
            assert "zz2019enzyme" not in got and papers == 22 + len(JSONL_PAPERS), got
    finally:
        await stop(session)


BAD = {
    "k": 0,
    "candidates": "many",
    "budgetMs": -1,
    "rerank": "yes",
    "prefetch": "neural",
    "contextChars": 5,
    "keyStyle": "",
    "bibFields": "huge",
    "debounceMs": 99999,
    "importWorkspaceBibs": "no",
    "bibliography": 3,
    "store": 7,
    "colour": "red",
}


@pytest.mark.parametrize("where", ["initializationOptions", "workspace/configuration"])
async def test_a_bad_value_is_shown_and_the_default_kept(
    tmp_path: Path, small_store: Path, where: str
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    if where == "initializationOptions":
        session = await start(root, small_store, options=BAD)
    else:
        session = await start(root, small_store, configuration=BAD)
    try:
        shown = await session.wait_for(
            lambda: len(session.client.messages) >= len(BAD) and session.client.messages,
            "a message per bad setting",
        )
        for name in BAD:
            (msg,) = [m for m in shown if repr(name) in m.message]
            assert msg.type == types.MessageType.Warning
            assert ("unknown setting" in msg.message) if name == "colour" else ("invalid" in msg.message), (
                msg.message
            )
        # The defaults are kept: 20 suggestions (the store has more matches than k=3 would show),
        # keys in the default style, entries without an abstract.
        uri = session.open("defaults.tex", latex(GLACIER + " as " + DENSE, bib="refs"))
        items = (await session.complete_final(uri, "\\cite{")).items
        assert 3 < len(items) <= 20
        assert "okonkwo2021glacier" in {i.label for i in items}
        glacier = next(i for i in items if i.label == "okonkwo2021glacier")
        await session.accept(uri, "\\cite{", glacier)
        (entry,) = [e for e in session.bib_edits if "okonkwo2021glacier" in e]
        assert "abstract" not in entry and "publisher" in entry
    finally:
        await stop(session)


# -- on a real ACM-CR store ------------------------------------------------------------------------
# ~1,600 SIGIR and CHIIR papers (``lsp_store`` and the ``acm_*`` fixtures in conftest.py; skipped
# without ../shared/data).


@pytest.mark.slow
async def test_invalid_settings_show_message_and_fall_back(acm_workspace: Path) -> None:
    """Bad values from initializationOptions and from workspace/configuration are each shown as a
    warning and replaced by the default; a valid change announced without settings is pulled."""
    session = await start_on_acm(acm_workspace, options={"k": "many"}, configuration={"contextChars": -5})
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
        _first, result = await session.complete_until_full(uri, r"ad-hoc retrieval \cite{")
        assert 0 < len(result.items) <= 20  # the default k
        # A valid change, announced by workspace/didChangeConfiguration, is pulled and applied.
        session.client.set_configuration({"k": 3}, section="citewise")
        session.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

        async def three() -> bool:
            _first, result = await session.complete_until_full(uri, r"ad-hoc retrieval \cite{")
            return len(result.items) == 3

        await session.poll(three, "k = 3 to be applied")
    finally:
        await stop(session)
