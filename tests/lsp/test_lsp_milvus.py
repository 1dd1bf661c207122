"""The language server answering a completion from a Milvus-backed store, end to end: the test
writes a small store, copies it to a Milvus Lite file, and starts the real server with the
``engine`` setting pointing at it (skips without the milvus extra)."""

from __future__ import annotations

import shutil

import pytest

from citewise.indexer.engine_milvus import open_engine
from citewise.indexer.store import Store

from ..conftest import server_command
from ..lsp_harness import build_store, start, stop

pytest.importorskip("pymilvus", reason="the milvus extra (pymilvus) is not installed; skipping Milvus tests")
pytest.importorskip("milvus_lite", reason="milvus-lite is not installed; skipping Milvus tests")

# The top three of the local engine (tests/lsp/test_lsp_completion.py): the glacier paper and the
# two papers it cites, which the store's citation data (the JSON Lines references) lifts with it.
GLACIER_TOP3 = {"okonkwo2021glacier", "hock2003degree", "reid2010surface"}
GLACIER = "Recurrent neural networks forecast daily glacier melt from temperature series better than degree-day models"


@pytest.mark.asyncio
async def test_completion_comes_from_the_milvus_collection(tmp_path) -> None:
    store_path = build_store(tmp_path / "store", with_jsonl=True)
    spec = f"milvus-lite:{tmp_path / 'engine.db'}#papers"
    store = Store(store_path)
    engine = open_engine(spec)
    assert engine.sync(store).inserted == store.count()
    shutil.rmtree(store_path.with_name(store_path.name + ".bm25"))  # the sync's statistics, not served
    engine.close()  # Milvus Lite: one process per file, and the server is the next one
    store.close()
    root = tmp_path / "ws"
    root.mkdir()
    lsp = await start(root, store_path, options={"rerank": False, "engine": spec})
    try:
        uri = lsp.open("glacier.tex", f"\\documentclass{{article}}\n{GLACIER} \\cite{{}}.\n")
        labels = [i.label for i in (await lsp.complete(uri, "\\cite{")).items]
        said = [m.message for m in lsp.client.messages]
        assert set(labels[:3]) == GLACIER_TOP3, (labels, said)
    finally:
        await stop(lsp)
    # Served by Milvus: the local BM25 index, which opening a store builds, was never built.
    assert not store_path.with_name(store_path.name + ".bm25").exists()  # the server built none


@pytest.mark.asyncio
async def test_serve_engine_flag_is_the_default_engine_setting(tmp_path) -> None:
    """``citewise serve --engine SPEC`` serves from the collection with no engine setting sent,
    as ``--store`` names the store."""
    store_path = build_store(tmp_path / "store", with_jsonl=True)
    spec = f"milvus-lite:{tmp_path / 'flag.db'}#papers"
    store = Store(store_path)
    engine = open_engine(spec)
    assert engine.sync(store).inserted == store.count()
    shutil.rmtree(store_path.with_name(store_path.name + ".bm25"))  # the sync's statistics, not served
    engine.close()
    store.close()
    root = tmp_path / "ws"
    root.mkdir()
    lsp = await start(root, store_path, options={"rerank": False}, command=server_command("--engine", spec))
    try:
        uri = lsp.open("glacier.tex", f"\\documentclass{{article}}\n{GLACIER} \\cite{{}}.\n")
        labels = [i.label for i in (await lsp.complete(uri, "\\cite{")).items]
        assert set(labels[:3]) == GLACIER_TOP3, (
            labels,
            [m.message for m in lsp.client.messages],
        )
    finally:
        await stop(lsp)
    assert not store_path.with_name(store_path.name + ".bm25").exists()  # the server built none


@pytest.mark.asyncio
async def test_a_missing_collection_is_one_message_that_says_how_to_write_it(tmp_path) -> None:
    from lsprotocol import types

    store_path = build_store(tmp_path / "store")
    spec = f"milvus-lite:{tmp_path / 'empty.db'}#nothing_here"
    root = tmp_path / "ws"
    root.mkdir()
    lsp = await start(root, store_path, options={"engine": spec}, ready=False)
    try:
        msg = await lsp.wait_for(lambda: lsp.client.messages, "a message")
        assert msg[0].type == types.MessageType.Error
        assert "no such collection" in msg[0].message and "citewise index" in msg[0].message
    finally:
        await stop(lsp)
