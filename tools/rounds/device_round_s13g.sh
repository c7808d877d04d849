#!/usr/bin/env bash
# Session 13, call S13g: the fused shared expert's pairs on the side stream (MoeExpertsParams::Stage; batch < 4,
# FP8 weights) beside moe.router / moe.route. GPU tests, then the decode step with --overlap on / off alternating
# (batch 1 twice each; batch 8 once each), FP8 weights, graphs.
# Usage: tools/device_pack.sh build-lead glm5prof engine_gpu_graph kernels_gpu_moe engine_gpu_fp8_weights
#        engine_gpu_golden; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13g
for t in engine_gpu_graph kernels_gpu_moe engine_gpu_fp8_weights engine_gpu_golden; do
  timeout 240 $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$?"
  grep -E "Failure|FAILED|PASSED|side ops|moe.shared|Expected|Which is|actual" $W/$t.log | head -12
done
step() {  # tag batches extra
  echo "== step $1"
  BATCHES="$2" WEIGHTS=fp8 GRAPHS=1 EXTRA="$3" timeout 300 tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step_$1" > "$W/step_$1.txt" 2>&1
  python3 tools/decode_step_summary.py "$W/step_$1/decode-step.json" 2>&1 | grep " fp8 graph"
  for d in "$W/step_$1"/runs/*/; do
    [ -f "$d/report.md" ] && sed -n '/## Run `fp8`/,/Per-layer/p' "$d/report.md" | grep -E "^\| (moe|mlp.norm)" | head -6
  done
  rm -rf "$W/step_$1"/runs/*/trace.json
}
step on1 "1" ""
step off1 "1" "--overlap off"
step on2 "1 8" ""
step off2 "1 8" "--overlap off"
device_round_pack
