#!/usr/bin/env bash
# Session 14, call S14g: the final build's GPU tests and issue 4's record.
#  1. every GPU test executable, 4 at a time under 240 s each (tools/device_tests.sh; kernels_gpu_moe_grouped only its
#     PairDownMatchesPerTokenBitwise test, alone, 240 s);
#  2. the decode step at batch 1, 8, 32 (context 32768) and 128 (8192), FP8 weights, graphs on, the three KV paths
#     (defaults: attn.o_proj without PDL on the tensor-core path, no L2 prefetch), then batch 8 and 32 with
#     --o-proj-pdl on (the previous default) in the same call.
# Usage: tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s14g
device_round_gpu_tests
BATCHES="1 8 32 128" WEIGHTS=fp8 GRAPHS=1 timeout 360 tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step" > "$W/step.txt" 2>&1
echo "sweep rc=$?"; python3 tools/decode_step_summary.py "$W/step/decode-step.json" 2>&1 | tail -n 14
BATCHES="8 32" WEIGHTS=fp8 GRAPHS=1 EXTRA="--o-proj-pdl on" timeout 200 tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step_pdl" > "$W/step_pdl.txt" 2>&1
echo "pdl-on rc=$?"; python3 tools/decode_step_summary.py "$W/step_pdl/decode-step.json" 2>&1 | tail -n 8
for d in "$W"/step/runs/b1-*/; do sed -n '/## Run `fp8`/,/Per-layer/p' "$d/report.md" | grep -E "^\| |latency_bound|measured steps|Tracing overhead" | head -40; done
rm -rf "$W"/step*/runs/*/trace.json
device_round_moe_grouped_alone
device_round_pack
