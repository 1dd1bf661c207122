"""HAtten distilled from the bi-encoder on top of the static bag (issue 26): it starts as the bag,
learns to agree with its teacher, resumes where a run stopped, and is served as trained."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from citewise.indexer.ann import AnnIndex
from citewise.indexer.store import Store
from citewise.models import dense_index
from citewise.models.biencoder_onnx import BiEncoder

from ..conftest import ACM_DL, require

MODELS = Path(dense_index.__file__).parent
DENSE, STATIC = MODELS / "dense", MODELS / "static"

pytestmark = [pytest.mark.needs_torch, pytest.mark.slow]


@pytest.fixture(scope="module")
def embedded_store(tmp_path_factory) -> Path:
    """SIGIR 2019's papers in a store, embedded by the shipped bi-encoder (the teacher)."""
    pytest.importorskip("torch")
    require(ACM_DL)
    if not (DENSE / "manifest.json").exists() or not (STATIC / "manifest.json").exists():
        pytest.skip("no shipped bi-encoder and static model in models/")
    from citewise.indexer.bibtex import iter_bibtex

    bib = require(ACM_DL / "sigir" / "sigir-2019.bib")
    store = Store(tmp_path_factory.mktemp("distill") / "papers.sqlite")
    store.import_source(str(bib), iter_bibtex(bib), fmt="bibtex")
    AnnIndex(store, BiEncoder(DENSE)).build()
    store.close()
    return store.path


def test_student_starts_as_the_bag_and_resumes(embedded_store: Path, tmp_path: Path) -> None:
    """Step 0 is exactly the static bag (zero head); a run stopped after one epoch and started
    again continues from its step and ends where an uninterrupted run ends."""
    from citewise.models.static_encoder import StaticEncoder
    from training.hatten_distill import Settings, train
    from training.static_distill import teacher_records

    ids, papers, teacher = teacher_records(embedded_store, DENSE)
    bag = StaticEncoder(STATIC).encode_papers(papers)
    held = np.array([i % 5 == 0 for i in ids])
    bag_cos = float((bag[held][:20000] * teacher[held][:20000]).sum(1).mean())

    s = Settings(epochs=2, batch=32, save_every=5, d_model=32)
    stopped = train([embedded_store], tmp_path / "a", Settings(**{**s.__dict__, "stop_after": 7}), DENSE)
    assert stopped["step"] == 7 and "final" not in stopped
    assert stopped["log"][0]["heldout_cos"] == pytest.approx(bag_cos, abs=1e-5), (
        "the untrained student is the bag"
    )
    resumed = train([embedded_store], tmp_path / "a", s, DENSE)
    whole = train([embedded_store], tmp_path / "b", s, DENSE)
    assert resumed["log"][0] == stopped["log"][0] and resumed["step"] == whole["step"] > 7
    assert resumed["final"]["heldout_cos_all"] == pytest.approx(whole["final"]["heldout_cos_all"], abs=2e-3)
    train_cos = whole["log"][-1]["heldout_cos"]
    assert train_cos > bag_cos - 0.01, (bag_cos, whole["log"])


def test_exported_student_serves_what_training_computed(embedded_store: Path, tmp_path: Path) -> None:
    """The served encoder (ONNX fp32 and int8 over the bag) gives the torch student's vectors, the
    model folder verifies (and names a missing bag model), and the ANN index serves it."""
    import torch

    from citewise.models.hatten_onnx import HattenEncoder
    from citewise.models.query import ContextQuery
    from citewise.models.static_encoder import StaticEncoder
    from training.hatten import Hatten
    from training.hatten_distill import DistillSet, Settings, export, train, vectors

    run = tmp_path / "run"
    train([embedded_store], run, Settings(epochs=1, batch=32, save_every=50, d_model=32), DENSE)
    out = tmp_path / "models" / "hatten"
    shutil.copytree(STATIC, tmp_path / "models" / "static")
    shutil.copytree(DENSE, tmp_path / "models" / "dense")
    export(run, out, tmp_path / "models" / "static")
    manifest = dense_index.verify_model(out)
    assert manifest["kind"] == "hatten" and manifest["bag_model"] == "../static"

    model = Hatten.load(run / "ckpt")[0].eval()
    data = DistillSet.load([embedded_store], DENSE, StaticEncoder(STATIC), model.cfg)
    with torch.no_grad():
        want = vectors(model, data, np.arange(len(data.held))).numpy()
    from training.static_distill import teacher_records

    _, papers, _ = teacher_records(embedded_store, DENSE)
    for precision, floor in (("fp32", 0.9999), ("int8", 0.98)):
        got = HattenEncoder(out, precision=precision).encode_papers(papers)
        assert float((got * want).sum(1).min()) > floor, precision

    enc = dense_index.make_encoder(out)
    q = ContextQuery("learning to rank with click models [CIT].")
    np.testing.assert_allclose(enc.encode_query(q), BiEncoder(DENSE).encode_query(q), atol=1e-6)
    store = Store(embedded_store)
    index = AnnIndex(store, enc, folder=tmp_path / "student.dense")
    assert index.build()["embedded"] == len(papers)
    assert len(index.search_query(q, 10)) == 10
    store.close()

    shutil.rmtree(tmp_path / "models" / "static")
    with pytest.raises(dense_index.ModelError, match="bag model"):
        dense_index.verify_model(out)
    assert json.loads((out / "manifest.json").read_text())["embed_by_default"] is True


def test_attention_over_the_bag_starts_as_the_bag_and_is_served_as_trained(
    embedded_store: Path, tmp_path: Path
) -> None:
    """Attempt 2 (``--student reweight``): zero scores are the static bag; after training, the served
    encoder (int8 score graph + numpy over the bag's rows) gives the torch student's vectors."""
    import torch

    from citewise.models.attention_bag import AttentionBagEncoder
    from citewise.models.static_encoder import StaticEncoder
    from training.hatten_distill import DistillSet, Settings, export, student_config, train, vectors
    from training.hatten_reweight import ReweightStudent

    bag = StaticEncoder(STATIC)
    data = DistillSet.load([embedded_store], DENSE, bag, student_config(bag))
    with torch.no_grad():
        fresh = vectors(ReweightStudent.new(bag, 32).eval(), data, np.arange(len(data.held))).numpy()
    np.testing.assert_allclose(fresh, data.bag, atol=1e-5)

    s = Settings(epochs=2, batch=32, save_every=10, d_model=32, lr=3e-3, student="reweight")
    state = train([embedded_store], tmp_path / "run", s, DENSE)
    assert state["final"]["heldout_cos_all"] > state["log"][0]["heldout_cos"], state["log"]
    shutil.copytree(STATIC, tmp_path / "models" / "static")
    shutil.copytree(DENSE, tmp_path / "models" / "dense")
    out = export(tmp_path / "run", tmp_path / "models" / "attention-bag", tmp_path / "models" / "static")
    assert dense_index.verify_model(out)["kind"] == "attention-bag"
    enc = dense_index.make_encoder(out)
    assert isinstance(enc, AttentionBagEncoder)
    model = ReweightStudent.load(tmp_path / "run" / "ckpt", bag).eval()
    with torch.no_grad():
        want = vectors(model, data, np.arange(len(data.held))).numpy()
    from training.static_distill import teacher_records

    _, papers, _ = teacher_records(embedded_store, DENSE)
    got = enc.encode_papers(papers)
    assert float((got * want).sum(1).min()) > 0.99


def test_trained_rows_change_only_where_papers_read_them_and_resume(
    embedded_store: Path, tmp_path: Path
) -> None:
    """Attempt 3 (``--student reweight-rows``): the bag's rows train as sparse embeddings (a row no
    paper reads keeps the bag's value) and the two optimisers resume."""
    from citewise.models.static_encoder import StaticEncoder
    from training.hatten_distill import DistillSet, Settings, student_config, train
    from training.hatten_reweight import ReweightStudent

    s = Settings(epochs=2, batch=32, save_every=5, d_model=32, student="reweight-rows", lr_rows=0.01)
    stopped = train([embedded_store], tmp_path / "run", Settings(**{**s.__dict__, "stop_after": 4}), DENSE)
    assert stopped["step"] == 4
    state = train([embedded_store], tmp_path / "run", s, DENSE)
    assert state["step"] > 4 and "final" in state
    bag = StaticEncoder(STATIC)
    model = ReweightStudent.load(tmp_path / "run" / "ckpt", bag)
    data = DistillSet.load([embedded_store], DENSE, bag, student_config(bag))
    read = np.unique(np.concatenate(data.pieces))
    moved = np.flatnonzero(
        np.abs(model.rows_emb.weight.detach().numpy() - bag.table.astype(np.float32)).max(1) > 0
    )
    assert len(moved) > 0 and set(moved.tolist()) <= set(read.tolist())
