"""Which dense model embeds a store (issue 26, item 4): the bi-encoder itself for a small store
(a user's own .bib), the fast attention bag for a big one, on real ACM-CR BibTeX files.

The thresholds are lowered here so that a few real files cross them; the rule is the same."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ACM_DL, require

ADCS, TRIR = "adcs/adcs-2016.bib", "journals/trir.bib"  # 14 and 31 papers


def _copy(tmp_path: Path, rel: str) -> Path:
    out = tmp_path / Path(rel).name
    shutil.copy(require(ACM_DL / rel), out)
    return out


def _built_kind(store) -> str:
    """The kind of the shipped model whose hash the store's embedding index records."""
    from citewise.indexer.ann import index_folder
    from citewise.models import dense_index

    built = json.loads((index_folder(store) / "meta.json").read_text())["model_hash"]
    kinds = {}
    for name in ("dense", "static_attention"):
        folder = dense_index.default_model_dir().parent / name
        kinds[dense_index.make_encoder(folder).model_hash] = json.loads(
            (folder / "manifest.json").read_text()
        )["kind"]
    return kinds.get(built, "other")


@pytest.fixture
def small_rule(monkeypatch):
    from citewise.models import dense_index

    if not (dense_index.default_model_dir().parent / "dense" / "manifest.json").exists():
        pytest.skip("the shipped bi-encoder (models/dense) is not installed")
    monkeypatch.delenv("CITEWISE_DENSE_MODEL", raising=False)
    monkeypatch.delenv("CITEWISE_HATTEN_MODEL", raising=False)
    monkeypatch.setattr(dense_index, "SMALL_STORE_PAPERS", 20)
    monkeypatch.setattr(dense_index, "LARGE_STORE_PAPERS", 50)
    return dense_index


def test_a_small_store_is_embedded_by_the_bi_encoder_and_keeps_it_while_it_grows(
    tmp_path: Path, small_rule, capsys
) -> None:
    from citewise.cli import main
    from citewise.indexer.importer import import_sources
    from citewise.indexer.store import Store

    dense_index = small_rule
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [_copy(tmp_path, ADCS)])  # 14 papers <= 20
    assert dense_index.build_index(store)["valid"] == 14
    assert _built_kind(store) == "biencoder"
    assert main(["info", "--store", str(store.path)]) == 0  # `info` names the store's own model
    assert "(biencoder, int8," in capsys.readouterr().out
    import_sources(store, [_copy(tmp_path, TRIR)])  # 45 papers: past 20, not past 50
    info = dense_index.build_index(store)
    assert info["embedded"] == 31 and not info["rebuilt"] and _built_kind(store) == "biencoder"
    index = dense_index.load_dense_source(store)
    assert (
        index is not None
        and len(index) == 45
        and index.encoder.model_hash
        == dense_index._biencoder_hash(dense_index.default_model_dir().parent / "dense")
    )
    # Past LARGE_STORE_PAPERS the next index re-embeds the whole store with the fast model.
    dense_index.LARGE_STORE_PAPERS = 40
    info = dense_index.build_index(store)
    assert info["rebuilt"] and info["embedded"] == 45 and _built_kind(store) == "attention-bag"


def test_a_big_store_gets_the_fast_model_and_serving_never_switches(
    tmp_path: Path, small_rule, monkeypatch
) -> None:
    from citewise.indexer.importer import import_sources
    from citewise.indexer.store import Store

    dense_index = small_rule
    store = Store(tmp_path / "b.sqlite")
    import_sources(store, [_copy(tmp_path, ADCS), _copy(tmp_path, TRIR)])  # 45 papers > 20
    assert dense_index.build_index(store)["valid"] == 45 and _built_kind(store) == "attention-bag"
    # The store shrinks below the line: serving keeps the model its index was built with (no
    # embedding on the way to an answer); the next index applies the rule.
    with store.conn:
        store.conn.execute("DELETE FROM papers WHERE id IN (SELECT id FROM papers ORDER BY id DESC LIMIT 30)")
    assert store.count() == 15
    assert dense_index.model_dir_for(store).name == "static_attention"
    assert dense_index.model_dir_for(store, building=True).name == "dense"
    # A model the user names wins over the size rule, building or serving.
    monkeypatch.setenv("CITEWISE_DENSE_MODEL", "static")
    assert dense_index.model_dir_for(store, building=True).name == "static"
