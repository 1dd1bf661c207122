#!/usr/bin/env bash
# Dense prefetch candidates on a lent GPU machine (issue 16): each dev query's top 200 from
# all-MiniLM-L6-v2 as shipped and, when bench/gpu_reranker.sh left one in /tmp/cw/bienc, from the
# fine-tuned bi-encoder; fused with the BM25 prefetch offline (bench/eval_dense_fusion.py).
# Carried: .devcarry/base, .devcarry/*_dump.jsonl.xz, .devcarry2/{acm,acl}_papers.jsonl.xz.
set -eo pipefail
source "$(dirname "$0")/gpu_env.sh"
[ -d "$W/base" ] || python3 -m training.reranker_transfer unpack-base .devcarry/base "$W/base"
for m in base bienc; do
  [ -d "$W/$m" ] || continue
  python3 -m training.biencoder retrieve "$W/$m" --papers .devcarry2/acm_papers.jsonl.xz \
    --out "$W/dense_acm_$m.jsonl" .devcarry/acm_dump.jsonl.xz
  python3 -m training.biencoder retrieve "$W/$m" --papers .devcarry2/acl_papers.jsonl.xz \
    --out "$W/dense_acl_$m.jsonl" .devcarry/acl_dump.jsonl.xz
  head -1 "$W/dense_acm_$m.jsonl" "$W/dense_acl_$m.jsonl"
done
tar -C "$W" -czf "$OUT/dense.tgz" $(cd "$W" && ls dense_*.jsonl) $(cd "$W" && ls res/biencoder.out 2>/dev/null)
if [ -d "$W/bienc" ]; then  # the fine-tuned weights in fp16 parts below 16 MiB
  python3 - "$W/bienc" "$OUT" <<'PY'
import sys
from pathlib import Path
from safetensors.torch import load_file, save_file
src, out = Path(sys.argv[1]), Path(sys.argv[2])
t = {k: v.half().contiguous() for k, v in load_file(str(src / "model.safetensors")).items()}
save_file(t, "/tmp/cw/bienc_fp16.safetensors")
data = Path("/tmp/cw/bienc_fp16.safetensors").read_bytes()
part = 15 * 1024 * 1024
for i in range(0, len(data), part):
    (out / f"bienc.fp16.part{i // part}").write_bytes(data[i : i + part])
PY
  cp "$W/bienc/config.json" "$OUT/bienc_config.json"
fi
ls -la "$OUT"
