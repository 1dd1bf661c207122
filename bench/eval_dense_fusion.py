"""Dense prefetch candidates fused with the BM25 prefetch, offline: the command-line face of
``citewise.evaluation.dense_fusion``. Prints JSON: metrics of the prefetch, the dense list alone and
their reciprocal-rank fusion at a few dense weights.

    python bench/eval_dense_fusion.py data/eval/acm_dump.jsonl runs/gpu3/dense_acm_base.jsonl
"""

from __future__ import annotations

import json
import sys

from citewise.evaluation.dense_fusion import fusion_metrics

if __name__ == "__main__":
    print(json.dumps(fusion_metrics(sys.argv[1], sys.argv[2]), indent=1))
