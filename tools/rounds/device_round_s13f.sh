#!/usr/bin/env bash
# Session 13, call S13f: replayed kernels back on their op's capture stream (CapturedOp::stream_id): engine_gpu_graph
# (SideStreamOpsMatchOneStream now also checks the graph replay's streams), then the batch-1 step (FP8 weights,
# graphs, overlap on) and its op table.
# Usage: tools/device_pack.sh build-lead glm5prof engine_gpu_graph; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13f
timeout 240 $BIN/engine_gpu_graph > $W/engine_gpu_graph.log 2>&1; echo "engine_gpu_graph rc=$?"
grep -E "Failure|FAILED|PASSED|side ops|absorptions|Expected|Which is|actual" $W/engine_gpu_graph.log | head -20
BATCHES=1 WEIGHTS=fp8 GRAPHS=1 timeout 200 tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step" > "$W/step.txt" 2>&1
python3 tools/decode_step_summary.py "$W/step/decode-step.json" 2>&1 | tail -n 3
for d in "$W"/step/runs/*/; do sed -n '/## Run `fp8`/,/Per-layer/p' "$d/report.md" | grep -E "^\| |measured steps|Hotspots|latency_bound" | head -40; done
rm -rf "$W"/step/runs/*/trace.json
device_round_pack
