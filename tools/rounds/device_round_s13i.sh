#!/usr/bin/env bash
# Session 13, call S13i: attn.prologue split under overlap (the q_a RMSNorm alone on the main stream, the KV and
# indexer-key parts on the side stream). GPU tests, then the batch-1 step with --overlap on / off alternating.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_attn_prologue engine_gpu_graph engine_gpu_golden
#        engine_gpu_fp8_weights; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13i
for t in kernels_gpu_attn_prologue engine_gpu_graph engine_gpu_golden engine_gpu_fp8_weights; do
  timeout 240 $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$?"
  grep -E "Failure|FAILED|PASSED|Expected|Which is|actual|overlapped" $W/$t.log | head -10
done
grep -o '"graph_record_step_us":[0-9.]*\|"traced_step_us":[0-9.]*' $W/engine_gpu_graph.log | tr '\n' ' '; echo
step() {  # tag batches extra
  BATCHES="$2" WEIGHTS=fp8 GRAPHS=1 EXTRA="$3" timeout 300 tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step_$1" > "$W/step_$1.txt" 2>&1
  echo "== $1: $(python3 tools/decode_step_summary.py "$W/step_$1/decode-step.json" 2>&1 | grep ' fp8 graph' | tr '\n' ' ')"
  rm -rf "$W/step_$1"/runs/*/trace.json
}
step on1 1 ""; step off1 1 "--overlap off"; step on2 1 ""; step off2 1 "--overlap off"
for d in "$W"/step_on2/runs/*/; do sed -n '/## Run `fp8`/,/Per-layer/p' "$d/report.md" | grep -E "^\| |latency_bound|^overlapped" | head -40; done
device_round_pack
