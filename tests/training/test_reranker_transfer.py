"""The trip to a GPU machine and back (issue 16): the base packed as int8 rows, training groups as
xz, a checkpoint's weights as fp16 parts, and dev lists scored there by a torch checkpoint."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import numpy as np
import pytest

from training import reranker_transfer as rt
from training.reranker_data import read_groups, write_groups

from .test_reranker import _groups, _tiny_base, tiny_checkpoint

pytestmark = pytest.mark.needs_torch


def test_base_round_trip_keeps_every_weight_close(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from safetensors.numpy import load_file

    base = _tiny_base(tmp_path / "tiny")
    back = rt.unpack_base(rt.pack_base(base, tmp_path / "packed"), tmp_path / "back")
    want, got = load_file(str(base / "model.safetensors")), load_file(str(back / "model.safetensors"))
    assert set(want) == set(got)
    for name, w in want.items():
        tol = np.abs(w).max(axis=-1, keepdims=True) / 127 * 0.51 + 1e-7 if w.ndim == 2 else 0
        assert np.all(np.abs(got[name] - w) <= tol), name  # int8 rows: within half a step
    assert (back / "vocab.txt").read_text() == (base / "vocab.txt").read_text()


def test_groups_travel_as_xz_and_read_back(tmp_path: Path) -> None:
    groups = _groups(5)
    groups[0].negs[0] = "x" * 5000  # text no budget reaches is cut
    src = tmp_path / "g.jsonl"
    write_groups(iter(groups), src)
    out = tmp_path / "g.jsonl.xz"
    assert rt.pack_groups([str(src)], out) == 5
    with lzma.open(out, "rt") as fh:
        assert len(fh.readlines()) == 5
    back = read_groups(out)
    assert [g.local for g in back] == [g.local for g in groups]
    assert len(back[0].negs[0]) == rt.CANDIDATE_CHARS


def test_checkpoint_comes_back_in_parts_and_scores_dev_lists(tmp_path: Path, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    from training.reranker_eval import metrics, score_dump
    from training.reranker_train import load_checkpoint_model

    ckpt = tiny_checkpoint(tmp_path)
    monkeypatch.setattr(rt, "PART", 20_000)  # force several parts
    parts = rt.slim(ckpt, tmp_path / "slim")
    assert len(parts) > 1 and all(p.stat().st_size <= 20_000 for p in parts)
    back = rt.restore(tmp_path / "slim", tmp_path / "restored")
    a, b = load_checkpoint_model(ckpt).state_dict(), load_checkpoint_model(back).state_dict()
    assert all(torch.allclose(a[k].float(), b[k].float(), atol=1e-2, rtol=1e-3) for k in a)

    dump = tmp_path / "dump.jsonl"
    row = {
        "qid": "q1",
        "relevant": ["p2"],
        "ids": ["p1", "p2", "p3"],
        "scores": [],
        "query": {
            "local": "a neural model [CIT].",
            "citing_title": "",
            "citing_abstract": "",
            "at": -1,
            "others": [],
        },
        "texts": ["graph graph model", "neural neural model", "ranking graph"],
    }
    dump.write_text(json.dumps(row) + "\n")
    scored = [
        json.loads(x) for x in score_dump(back, dump, tmp_path / "scores.jsonl").read_text().splitlines()
    ]
    assert len(scored[0]["scores"]) == 3 and scored[0]["ids"] == row["ids"]
    m = metrics(scored, 3, 0)
    assert 0 < m["MRR"] <= 1
