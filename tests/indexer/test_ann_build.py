"""The nearest-neighbour graph's build settings: the beam it is built with (float32 64, int8 200),
the wider beam of a deep search, and the vectors handed to it block by block from ``emb.f32``.
Real ACM-CR papers embedded by the shipped model, compared with exact search."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from citewise.indexer import ann
from citewise.indexer.bibtex import iter_bibtex
from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store
from citewise.models import dense_index

from ..conftest import ACM_DL, require


@pytest.fixture(scope="module")
def acm_store(tmp_path_factory) -> Store:
    """Five SIGIR years of ACM-CR (over 1,000 papers), embedded once by the shipped default model."""
    folder = tmp_path_factory.mktemp("acm")
    store = Store(folder / "acm.sqlite")
    for year in range(2016, 2021):
        bib = require(ACM_DL / "sigir" / f"sigir-{year}.bib")
        records = [r for r in iter_bibtex(bib) if isinstance(r, PaperRecord)]
        store.import_source(str(bib), records, fmt="bibtex")
    return store


def _encoder():
    folder = dense_index.default_model_dir()
    if not (folder / "manifest.json").exists():
        pytest.skip(f"no dense model installed at {folder}")
    return dense_index.make_encoder(folder)


def _overlap(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> float:
    return len({p for p, _ in a} & {p for p, _ in b}) / max(len(b), 1)


def test_graph_and_deep_search_agree_with_exact_search(acm_store: Store, tmp_path: Path, monkeypatch) -> None:
    enc = _encoder()
    exact = ann.AnnIndex(acm_store, enc, folder=tmp_path / "exact", exact_below=10**9)
    assert exact.build()["kind"] == "exact"
    monkeypatch.setattr(ann, "ADD_BLOCK_ROWS", 300)  # several blocks read from emb.f32
    graph = ann.AnnIndex(acm_store, enc, folder=tmp_path / "graph", exact_below=0)
    summary = graph.build()
    assert summary["kind"] == "usearch-f32" and summary["valid"] == len(exact) > 1000
    meta = json.loads(graph.meta_path.read_text())
    assert meta["ef_construction"] == ann.EF_CONSTRUCTION == 64
    rows = np.fromfile(graph.folder / "emb.f32", dtype=np.float32).reshape(-1, enc.dim)
    queries = rows[::97] + 0.05 * np.random.default_rng(1).normal(size=(len(rows[::97]), enc.dim))
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    top10 = [_overlap(graph.search(q, 10), exact.search(q, 10)) for q in queries]
    assert np.mean(top10) >= 0.99, np.mean(top10)
    deep = len(exact) // 2  # a deep search, as the prefetch's 1,000 of a bigger store
    got = [graph.search(q, deep) for q in queries[:5]]
    assert all(len(g) == deep for g in got)
    assert np.mean([_overlap(g, exact.search(q, deep)) for g, q in zip(got, queries, strict=False)]) >= 0.98


def test_int8_graph_keeps_the_wider_beam(acm_store: Store, tmp_path: Path) -> None:
    enc = _encoder()
    quant = ann.AnnIndex(acm_store, enc, folder=tmp_path / "i8", exact_below=0, quantize_above=0)
    assert quant.build()["kind"] == "usearch-i8"
    assert json.loads(quant.meta_path.read_text())["ef_construction"] == 200
    served = ann.AnnIndex(acm_store, enc, folder=tmp_path / "i8", exact_below=0)
    assert served.load() and served.kind == "usearch-i8"
    assert served._backend is not None and served._backend.ef_construction == 200
