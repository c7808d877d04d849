#!/usr/bin/env bash
# Session 17, call S17g: the final build's GPU tests and issue 4's record.
#  1. every GPU test executable, 4 at a time under 240 s each (tools/device_tests.sh; kernels_gpu_moe_grouped only its
#     PairDownMatchesPerTokenBitwise test, alone);
#  2. the decode step at batch 1, 8, 32 (context 32768) and 128 (8192), FP8 weights, graphs on, the three KV paths
#     (defaults: the batch-1 MoE down kernel's early weight loads on, --moe-fused off).
# Usage: tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; copy ../shared/golden and configs into
#        .device/shared/; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s17g
device_round_gpu_tests
BATCHES="1 8 32 128" WEIGHTS=fp8 GRAPHS=1 timeout 330 tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step" > "$W/step.txt" 2>&1
echo "sweep rc=$?"; python3 tools/decode_step_summary.py "$W/step/decode-step.json" 2>&1 | tail -n 14
rm -rf "$W"/step*/runs/*/trace.json
device_round_moe_grouped_alone
device_round_pack
