"""The offline dense-fusion figure: lists of Anthology ids (strings) fused by the product's ``rrf``."""

from __future__ import annotations

import json
from pathlib import Path

from citewise.evaluation.dense_fusion import fusion_metrics


def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_fusion_ranks_the_paper_both_lists_hold_first_and_maps_ids_back(tmp_path: Path) -> None:
    """BM25 ranks the relevant paper third and dense second; fused, it is first (RRF sums both
    ranks), and the citing paper's own id, which the dense list holds, is dropped."""
    dump = _jsonl(
        tmp_path / "dump.jsonl",
        [{"qid": "P19-1001#3", "ids": ["D18-1001", "N19-1002", "W04-1013"], "relevant": ["W04-1013"]}],
    )
    dense = _jsonl(
        tmp_path / "dense.jsonl", [{"qid": "P19-1001#3", "dense": ["P19-1001", "J93-2004", "W04-1013"]}]
    )
    out = fusion_metrics(dump, dense, weights=(1.0, 0.01))
    assert out["prefetch"]["MRR"] == round(1 / 3, 4)
    assert out["dense"]["MRR"] == 0.5  # own paper removed: W04-1013 is second
    assert out["rrf dense w=1"]["MRR"] == 1.0
    # With almost no weight on dense, BM25's order wins again: D18-1001 (1/61) over W04-1013
    # (1/63 + 0.01/62).
    assert out["rrf dense w=0.01"]["MRR"] == round(1 / 3, 4)
