#!/usr/bin/env bash
# Session 13, call S13m: after review 13b's mends (overlapped time only for ops declared on the side stream):
# engine_gpu_graph, and the batch-1 step's op table (the overlapped column).
# Usage: tools/device_pack.sh build-lead glm5prof engine_gpu_graph; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13m
timeout 240 $BIN/engine_gpu_graph > $W/engine_gpu_graph.log 2>&1; echo "engine_gpu_graph rc=$?"
grep -E "Failure|FAILED|PASSED|side ops|moe.shared" $W/engine_gpu_graph.log | head -12
BATCHES=1 WEIGHTS=fp8 GRAPHS=1 timeout 120 tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step" > "$W/step.txt" 2>&1
python3 tools/decode_step_summary.py "$W/step/decode-step.json" 2>&1 | grep " fp8 graph"
for d in "$W"/step/runs/*/; do sed -n '/## Run `fp8`/,/Per-layer/p' "$d/report.md" | grep -E "latency_bound|^\| (attn.q_absorb|attn.prologue|attn.indexer.weights|moe.shared|moe.experts|op) " | head -10; done
rm -rf "$W"/step/runs/*/trace.json
device_round_pack
