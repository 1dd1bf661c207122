"""The static paper encoder distilled from the bi-encoder (issue 16, embedding throughput):
the bag arithmetic, a real distillation on ACM-CR papers, and serving through the ANN index."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from citewise.indexer.ann import AnnIndex
from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store
from citewise.models import dense_index
from citewise.models.biencoder_onnx import BiEncoder
from citewise.models.query import ContextQuery
from citewise.models.static_encoder import StaticEncoder, bag_vectors

from ..conftest import ACM_DL, require

DENSE = Path(dense_index.__file__).parent / "dense"


def test_bag_is_the_normalised_weighted_sum_of_rows() -> None:
    rng = np.random.default_rng(0)
    table = rng.integers(-127, 128, (50, 8)).astype(np.int8)
    weights = rng.random(50).astype(np.float32)
    seqs = [[3, 4, 4, 9], [], [49], list(range(50))] * 70  # more than one batch, an empty paper
    got = bag_vectors(seqs, table, weights, 8, batch=64)
    for s, v in zip(seqs, got, strict=True):
        if not s:
            assert not v.any(), "an empty paper is the zero vector, not NaN"
            continue
        want = (weights[s][:, None] * table[s].astype(np.float32)).sum(0)
        np.testing.assert_allclose(v, want / np.linalg.norm(want), rtol=1e-5, atol=1e-6)


@pytest.mark.needs_torch
@pytest.mark.slow
def test_distilled_from_a_real_store_agrees_with_its_teacher_and_is_served(tmp_path: Path) -> None:
    """Distil on the SIGIR 2019 papers the shipped bi-encoder embedded: held-out agreement grows,
    the served (int8) encoder agrees as training measured, and the ANN index serves it."""
    pytest.importorskip("torch")
    require(ACM_DL)
    if not (DENSE / "manifest.json").exists():
        pytest.skip("no shipped bi-encoder in models/dense")
    from citewise.indexer.bibtex import iter_bibtex
    from training.static_distill import train

    bib = require(ACM_DL / "sigir" / "sigir-2019.bib")
    store = Store(tmp_path / "papers.sqlite")
    store.import_source(str(bib), iter_bibtex(bib), fmt="bibtex")
    teacher = AnnIndex(store, BiEncoder(DENSE))
    teacher.build()
    out = tmp_path / "student"
    manifest = train([store.path], out, model_dir=DENSE, epochs=4, batch=32, holdout=4)
    log = manifest["training"]["log"]
    assert log[-1]["heldout_cos"] > log[0]["heldout_cos"] + 0.1, log
    assert manifest["kind"] == "static" and (out / manifest["query_model"]).resolve() == DENSE.resolve()

    enc = dense_index.make_encoder(out)
    assert isinstance(enc, StaticEncoder)
    dense_index.verify_model(out)
    pids, teacher_vecs = teacher.vectors()
    papers = store.get_many([int(p) for p in pids])
    served = enc.encode_papers([papers[int(p)] for p in pids])
    train_rows = np.array([int(p) % 4 != 0 for p in pids])
    served_cos = float((served[train_rows] * teacher_vecs[train_rows]).sum(1).mean())
    assert abs(served_cos - log[-1]["train_cos"]) < 0.02, (served_cos, log[-1])

    student = AnnIndex(store, enc, folder=tmp_path / "student.dense")
    assert student.build()["embedded"] == len(pids)
    with_abstracts = [
        p for p in papers.values() if isinstance(p, PaperRecord) and p.abstract.count(". ") >= 3
    ]
    ranks = []
    for p in with_abstracts[:30]:
        hits = [
            pid for pid, _ in student.search_query(ContextQuery(p.abstract.split(". ")[1] + " [CIT]."), 20)
        ]
        ranks.append(hits.index(p.id) if p.id in hits else 20)
    assert np.median(ranks) <= 2, ranks
    assert json.loads((out / "manifest.json").read_text())["files"].keys() == {
        "table.int8.npy",
        "weights.f32.npy",
        "tokenizer.json",
    }


def test_shipped_static_model_is_intact_and_named_by_its_folder(monkeypatch, tmp_path: Path) -> None:
    """``CITEWISE_DENSE_MODEL=static`` picks the shipped fast model; a folder the user has by that
    name wins; the shipped files match the manifest and its query model is the shipped bi-encoder."""
    shipped = Path(dense_index.__file__).parent / "static"
    if not (shipped / "manifest.json").exists():
        pytest.skip("no shipped static model in models/static")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CITEWISE_DENSE_MODEL", "static")
    assert dense_index.default_model_dir() == shipped
    manifest = dense_index.verify_model(shipped)
    assert (shipped / manifest["query_model"]).resolve() == DENSE.resolve()
    enc = dense_index.make_encoder(shipped)
    assert isinstance(enc, StaticEncoder) and enc.table.dtype == np.int8
    (tmp_path / "static").mkdir()
    assert dense_index.default_model_dir() == Path("static"), "the user's own folder comes first"


def test_a_static_model_without_its_query_model_is_reported(tmp_path: Path) -> None:
    """The paper table alone cannot answer a query: a copied folder whose ``query_model`` is not
    beside it is refused with the folder named, not loaded to fail at the first keystroke."""
    shipped = Path(dense_index.__file__).parent / "static"
    if not (shipped / "manifest.json").exists():
        pytest.skip("no shipped static model in models/static")
    import shutil

    copy = tmp_path / "static"
    shutil.copytree(shipped, copy)
    with pytest.raises(dense_index.ModelError, match="query model"):
        dense_index.verify_model(copy)
