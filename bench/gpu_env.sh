# Sourced by bench/gpu_reranker.sh and bench/gpu_dense.sh on a lent GPU machine: the package
# without installing it, and the one import that machine lacks. Sets W (work folder) and OUT.
# PYTHONSAFEPATH: the checkout's own citewise/ (no models/ inside) must not shadow the layout below.
export PYTHONSAFEPATH=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
W=/tmp/cw
OUT=${OUT:-$W/out}
mkdir -p "$W/pkg/citewise" "$OUT" "$W/res"
# pyproject's package-dir layout (the machine has torch, transformers, tokenizers)
cp citewise/*.py "$W/pkg/citewise/"
for d in models indexer server; do ln -sfn "$PWD/$d" "$W/pkg/citewise/$d"; done
export PYTHONPATH=$W/pkg
# PyStemmer is the one import the machine lacks: its wheel travels in .devcarry/whl.
if ! python3 -c 'import Stemmer' 2>/dev/null; then
  python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target "$W/site" .devcarry/whl/*.whl
  export PYTHONPATH=$W/pkg:$W/site
fi
