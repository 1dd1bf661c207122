"""``citewise eval --plot``: the curve of R@10/MRR against the number of reranked candidates, on a
small collection and a tiny reranker the test builds (trained one step, exported to ONNX)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..models.test_focus import EVAL_LIB, EVAL_XML
from ..training.test_reranker import tiny_reranker

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _eval_args(tmp_path: Path) -> list[str]:
    """``citewise eval acm-cr`` over a five-paper library and one citing paper written here."""
    (tmp_path / "lib.bib").write_text(EVAL_LIB, encoding="utf-8")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "q.xml").write_text(EVAL_XML, encoding="utf-8")
    (tmp_path / "blacklist.txt").write_text("10.1145/citing\n", encoding="utf-8")
    args = ["eval", "acm-cr", "--papers", str(tmp_path / "dev"), "--collection", str(tmp_path / "lib.bib")]
    return args + ["--blacklist", str(tmp_path / "blacklist.txt"), "--store", str(tmp_path / "s.sqlite")]


@pytest.mark.slow
@pytest.mark.needs_torch
def test_plot_draws_a_png_whose_zero_point_is_the_prefetch(tmp_path: Path, capsys) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("matplotlib")
    from citewise.cli import main

    args = _eval_args(tmp_path)
    served = tiny_reranker(tmp_path)
    prefetch_json = tmp_path / "prefetch.json"
    assert main([*args, "--no-rerank", "--json", str(prefetch_json), "-q"]) == 0
    png = tmp_path / "docs" / "curve.png"
    plot = ["--reranker", str(served), "--plot", str(png), "--plot-candidates", "3,0,1", "-q"]
    assert main([*args, *plot]) == 0
    assert png.read_bytes().startswith(PNG_MAGIC) and png.stat().st_size > 1000
    got = json.loads(png.with_suffix(".json").read_text())
    points = got["points"]["sentence"]
    assert [p["candidates"] for p in points] == [0, 1, 3]
    prefetch = json.loads(prefetch_json.read_text())
    assert points[0]["R@10"] == prefetch["R@10"] and points[0]["MRR"] == prefetch["MRR"]
    assert all(p["queries"] == prefetch["queries"] for p in points)
    assert got["reranker"] == str(served) and "rerank@3" in capsys.readouterr().out


def test_plot_without_a_reranker_says_so(tmp_path: Path, capsys) -> None:
    from citewise.cli import main

    # --no-rerank: the shipped reranker would otherwise be the one plotted
    rc = main([*_eval_args(tmp_path), "--no-rerank", "--plot", str(tmp_path / "c.png"), "-q"])
    assert rc != 0 and "--plot needs a reranker" in capsys.readouterr().err
    assert not (tmp_path / "c.png").exists()


def test_bad_candidate_lists_are_refused(tmp_path: Path, capsys) -> None:
    from citewise.cli import main

    with pytest.raises(SystemExit):
        main([*_eval_args(tmp_path), "--plot", str(tmp_path / "c.png"), "--plot-candidates", "5,-1"])
    assert "--plot-candidates" in capsys.readouterr().err
