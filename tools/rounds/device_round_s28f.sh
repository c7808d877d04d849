#!/usr/bin/env bash
# Session 28, call S28f. attn.mla in the decode step with the fp16-operand wgmma MLA (A: --mla-fp8-operands f16, the
# default) against the bf16 form (B), GLM-5 FP8 weights, `fp8` KV path, graphs. S28e's profiles did not fit the lent
# H100 (80 GB: the 495,000-token pool of device_round_profile is 60 GB), so here the pool is 280,000 tokens: batch 32 at
# context 8192, batch 128 at 2048 (top-k 2048 either way: attn.mla's work does not depend on the context beyond it).
# Usage: tools/device_pack.sh build-lead glm5prof; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s28f
run() {  # TAG BATCH CONTEXT OPERANDS
  local d=$W/$1; mkdir -p "$d"
  timeout 100 "$BIN/glm5prof" profile --model glm5 --kv-path fp8 --batch "$2" --context "$3" --pool-tokens 280000 \
    --weights-dtype fp8 --steps 2 --warmup 2 --untraced-steps 3 --graph --mla-fp8-operands "$4" --out "$d" > "$d/log" 2>&1
  echo "$1 rc=$? untraced $(python3 -c "import json;r=json.load(open('$d/report.json'));print(round(r['runs'][0]['timing']['untraced_step_us']/1000,3))" 2>/dev/null) ms"
  grep -E "^\| (attn.mla) \|" "$d/report.md" | sed 's/^/    /'
  tail -n 2 "$d/log" | grep -i error
  rm -f "$d/trace.json"
}
run b32-A 32 8192 f16
run b32-B 32 8192 bf16
run b128-A 128 2048 f16
run b128-B 128 2048 bf16
device_round_pack
