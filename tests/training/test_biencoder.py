"""The dense prefetch bi-encoder (issue 16): training, ONNX export, serving through the ANN index
and the prefetch fusion, and the shipped model on real ACM-CR papers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from citewise.cli import main
from citewise.indexer.records import PaperRecord
from citewise.models import dense_index
from citewise.models.biencoder_onnx import BiEncoder, paper_text, query_text
from citewise.models.query import ContextQuery
from training.reranker_data import write_groups

from ..conftest import ACM_DL, require
from .test_reranker import _groups, _tiny_base


def _tiny_biencoder(tmp_path: Path) -> tuple[Path, Path]:
    """(trained BERT folder, exported served folder) of a tiny BERT trained one epoch."""
    pytest.importorskip("torch")
    from training.biencoder import train
    from training.biencoder_export import export
    from training.reranker_train import load_tokenizer

    base = _tiny_base(tmp_path / "tiny")
    load_tokenizer(base).save(str(base / "tokenizer.json"))
    data = tmp_path / "g.jsonl"
    write_groups(iter(_groups(6)), data)
    trained = train(str(base), str(data), str(tmp_path / "bienc"), epochs=1, batch=3)
    return trained, export(trained, tmp_path / "served", fuse_weight=0.5, extra={"fuse_by_default": True})


@pytest.mark.needs_torch
def test_exported_biencoder_agrees_with_torch_and_is_served(tmp_path: Path, monkeypatch, capsys) -> None:
    import torch

    from training.biencoder import DOC_LEN, Encoder

    trained, served = _tiny_biencoder(tmp_path)
    manifest = dense_index.verify_model(served)  # every file listed with its hash
    assert manifest["kind"] == "biencoder" and manifest["fuse_weight"] == 0.5
    assert not (served / "model.onnx").exists(), "the fp32 graph is never shipped"
    papers = [
        PaperRecord(title=f"{w} model", abstract=f"a {w} graph for ranking")
        for w in ("neural", "graph", "ranking")
    ]
    enc = BiEncoder(served)
    got = enc.encode_papers(papers)
    assert got.shape == (3, enc.dim) and np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-4)
    with torch.no_grad():
        want = Encoder(trained).eval()([paper_text(p.title, p.abstract) for p in papers], DOC_LEN).numpy()
    assert (got * want).sum(axis=1).min() > 0.95, "int8 ONNX vectors drift from torch's"
    assert enc.model_hash == BiEncoder(served).model_hash
    assert query_text("dense retrieval [CIT] works", "A draft") == "dense retrieval works [SEP] A draft"

    # Served: `citewise index --embed` embeds with it, and the hybrid prefetch fuses it.
    monkeypatch.setenv("CITEWISE_DENSE_MODEL", str(served))
    bib = tmp_path / "lib.bib"
    bib.write_text(
        "@article{a, title={Neural Model for Ranking}, abstract={A neural graph.}, year={2020}, doi={10.9/a}}\n"
        "@article{b, title={Graph Model}, abstract={A graph for ranking.}, year={2021}, doi={10.9/b}}\n",
        encoding="utf-8",
    )
    store = str(tmp_path / "s.sqlite")
    assert main(["index", str(bib), "--store", store, "--json", "-q", "--embed"]) == 0
    assert json.loads(capsys.readouterr().out)["embedding"]["valid"] == 2
    assert main(["search", "neural graph model", "--store", store, "--json", "--prefetch", "hybrid"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert {h["doi"] for h in hits} == {"10.9/a", "10.9/b"}
    assert main(["info", "--store", store, "--json"]) == 0
    assert '"kind": "biencoder"' in capsys.readouterr().out

    from citewise.indexer.store import Store
    from citewise.models.recommender import Recommender

    rec = Recommender(Store(store, create=False))
    assert rec.mode() == "hybrid", "a fused-by-default model is used once the store has embeddings"
    assert rec.prefetcher().settings.weights["dense"] == 0.5

    # The shipped reranker steps aside in the modes its manifest names (it measured worse there).
    from citewise.models import recommender as recommender_mod

    class Stage:
        manifest = {"skip_modes": ["hybrid"]}

        def rerank(self, query, cands, papers, citing=None):
            return cands[::-1]

    monkeypatch.setattr(recommender_mod, "_SHIPPED", [Stage()])
    rec = Recommender(Store(store, create=False))
    assert rec.second_stage is None
    rec.prefetch_mode = "bm25"
    assert isinstance(rec.second_stage, Stage)
    explicit = Recommender(Store(store, create=False), second_stage=Stage())
    assert isinstance(explicit.second_stage, Stage), "a stage given explicitly is always used"


@pytest.mark.slow
def test_shipped_biencoder_finds_a_paper_from_a_sentence_about_it() -> None:
    """The shipped model on real ACM-CR papers: a paper's own abstract sentence, as a query, puts
    the paper near the top of 300 (a sanity check of the shipped weights, not a dev figure)."""
    require(ACM_DL)
    folder = Path(dense_index.__file__).parent / "dense"
    if not (folder / "manifest.json").exists():
        pytest.skip("no shipped bi-encoder in models/dense")
    from citewise.indexer.bibtex import iter_bibtex

    bib = require(ACM_DL / "sigir" / "sigir-2019.bib")
    records = [r for r in iter_bibtex(bib) if isinstance(r, PaperRecord) and r.abstract.count(". ") >= 3][
        :300
    ]
    dense_index.verify_model(folder)
    enc = BiEncoder(folder)
    vecs = enc.encode_papers(records)
    ranks = []
    for i, r in enumerate(records[:40]):
        sentence = r.abstract.split(". ")[1]
        q = enc.encode_query(ContextQuery(sentence + " [CIT]."))
        ranks.append(int((vecs @ q > vecs[i] @ q).sum()))
    assert np.median(ranks) <= 2, ranks
