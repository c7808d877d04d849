#!/usr/bin/env bash
# Session 13, call S13e: the side stream (EngineOptions::overlap: attn.indexer.weights_proj and attn.q_absorb off the
# main chain) and the mma.sync MLA kernel's second trim (issue_tile in fixed rounds; no stale dequantization after
# the last tile). GPU tests first, then the batch-1 probe and the decode step: new with --overlap on / off and the
# previous commit's binary (glm5prof_old, 4c11872), batch 1 and 32, FP8 weights, graphs.
# Usage: tools/device_pack.sh build-lead glm5prof glm5prof_old mla_small_batch_probe engine_gpu_graph
#        engine_gpu_golden kernels_gpu_mla_decode engine_gpu_tensor_parallel; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13e
for t in kernels_gpu_mla_decode engine_gpu_golden engine_gpu_graph engine_gpu_tensor_parallel; do
  timeout 240 $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$?"; grep -E "Failure|FAILED|PASSED|side ops|absorptions" $W/$t.log | head -12
done
timeout 120 $BIN/mla_small_batch_probe 2>&1 | tee $W/probe.txt | grep -E "variant|auto"
step() {  # tag binary batches extra
  echo "== step $1"
  BATCHES="$3" WEIGHTS=fp8 GRAPHS=1 EXTRA="$4" timeout 300 tools/decode_step_bench.sh "$BIN/$2" "$W/step_$1" > "$W/step_$1.txt" 2>&1
  python3 tools/decode_step_summary.py "$W/step_$1/decode-step.json" 2>&1 | tail -n 6
  for d in "$W/step_$1"/runs/*/; do
    [ -f "$d/report.md" ] && sed -n '/## Run `fp8`/,/Per-layer/p' "$d/report.md" | grep -E "^\| (attn.q_absorb|attn.indexer.weights|attn.mla|attn.indexer.topk) " | head -4
  done
  rm -rf "$W/step_$1"/runs/*/trace.json
}
step on glm5prof "1" ""
step off glm5prof "1" "--overlap off"
step old glm5prof_old "1" ""
step on2 glm5prof "1 32" ""
step off2 glm5prof "1 32" "--overlap off"
device_round_pack
