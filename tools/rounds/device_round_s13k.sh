#!/usr/bin/env bash
# Session 13, call S13k: issue 4's record on the final build: the decode step at batch 1, 8, 32 (context 32768) and
# 128 (8192), FP8 weights, graphs on, the three KV paths (overlap on, the default), then batch 1 with --overlap off.
# Usage: tools/device_pack.sh build-lead glm5prof; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13k
BATCHES="1 8 32 128" WEIGHTS=fp8 GRAPHS=1 timeout 360 tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step" > "$W/step.txt" 2>&1
echo "sweep rc=$?"; python3 tools/decode_step_summary.py "$W/step/decode-step.json" 2>&1 | tail -n 14
BATCHES=1 WEIGHTS=fp8 GRAPHS=1 EXTRA="--overlap off" timeout 80 tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step_off" > "$W/step_off.txt" 2>&1
echo "off rc=$?"; python3 tools/decode_step_summary.py "$W/step_off/decode-step.json" 2>&1 | tail -n 3
for d in "$W"/step/runs/b1-*/; do sed -n '/## Run `fp8`/,/Per-layer/p' "$d/report.md" | grep -E "^\| |latency_bound|^overlapped|measured steps|Tracing overhead" | head -40; done
rm -rf "$W"/step*/runs/*/trace.json
device_round_pack
