#!/usr/bin/env bash
# Train the cross-encoder reranker on a lent GPU machine (issue 16), both losses side by side, score
# the dev dumps with each, and send back the better one (docs/reranker.md, "GPU recipe").
# Runs there, in the checkout's root, with .devcarry/ carried (built here by the recipe's packing
# step): base/ (int8 base encoder), train.jsonl.xz, acm_dump.jsonl.xz, acl_dump.jsonl.xz.
# Usage: [LOSSES="listwise triplet"] [MAX_LEN=128] [BIENCODER=1] bash bench/gpu_reranker.sh STEPS
# (results under $OUT; BIENCODER=1 also fine-tunes the bi-encoder of models/biencoder.py beside them,
# left in /tmp/cw/bienc for bench/gpu_dense.sh)
set -eo pipefail
STEPS=${1:-5000}
source "$(dirname "$0")/gpu_env.sh"
# Whatever happens, the logs come back.
trap 'cp -f "$W"/*/train.log "$W/res/" 2>/dev/null || true; tar -C "$W" -czf "$OUT/results.tgz" res' EXIT
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$W/res/gpu.txt"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' | tee -a "$W/res/gpu.txt"
python3 -m training.reranker_transfer unpack-base .devcarry/base "$W/base"
LOSSES=${LOSSES:-listwise triplet}
MAX_LEN=${MAX_LEN:-128}
if [ "${BIENCODER:-0}" = 1 ]; then
  python3 -m training.biencoder train --base "$W/base" --data .devcarry/train.jsonl.xz \
    --out "$W/bienc" > "$W/res/biencoder.out" 2>&1 &
fi
for loss in $LOSSES; do
  # A time limit as well as a step count: the lent machine's command limit is 10 minutes.
  timeout "${TRAIN_SECONDS:-400}" python3 -m training.reranker_train --data .devcarry/train.jsonl.xz --out "$W/$loss" \
    --base "$W/base" --loss "$loss" --margin 1.0 --negatives 7 --groups-per-step 16 \
    --max-steps "$STEPS" --warmup 300 --lr 5e-5 --max-len "$MAX_LEN" --query-max 64 --local-max 48 \
    --checkpoint-minutes 1.5 --val-groups 500 --log-every 100 --device cuda > "$W/res/train_$loss.out" 2>&1 &
done
wait
for loss in $LOSSES; do
  cp "$W/$loss/train.log" "$W/res/train_$loss.log"
  for ds in acm acl; do
    python3 -m training.reranker_eval score-dump "$W/$loss/latest" ".devcarry/${ds}_dump.jsonl.xz" \
      --out "$W/res/${ds}_$loss.jsonl" > "$W/res/${ds}_$loss.txt"
    sed -n 1,12p "$W/res/${ds}_$loss.txt"
  done
  python3 -m training.reranker_transfer slim "$W/$loss/latest" "$W/slim_$loss" > /dev/null
done
# The better loss on ACM-CR dev (the selection set): best R@10 + MRR over (candidates, weight).
best=$(python3 - "$W/res" $LOSSES <<'PY'
import json, sys
from training.reranker_eval import metrics
res = sys.argv[1]
def best(loss):
    run = [json.loads(l) for l in open(f"{res}/acm_{loss}.jsonl")]
    return max(m["R@10"] + m["MRR"] for n in (5, 10, 20, 30, 50) for w in (0, 0.5, 1, 2)
               for m in [metrics(run, n, w)])
scores = {loss: best(loss) for loss in sys.argv[2:]}
print(json.dumps(scores), file=sys.stderr)
print(max(scores, key=scores.get))
PY
)
echo "better on ACM-CR dev: $best"
echo "$best" > "$W/res/best.txt"
cp "$W/slim_$best"/* "$OUT/"
ls -la "$OUT"
