#!/usr/bin/env bash
# Session 18, call S18c: issue 4's whole table on the session's final build, and every GPU test on it.
#  1. every GPU test executable (tools/device_tests.sh, 4 at a time; kernels_gpu_moe_grouped's PairDown test ran alone
#     in S18b on the same MoE code);
#  2. tools/decode_step_bench.sh: batch 1, 8, 32 (context 32768) and 128 (32768 does not fit: the bench falls back
#     to 16384 / 8192), FP8 and BF16 weights, graphs on and off, the three KV paths in each run.
# Usage: tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; copy ../shared/golden and configs into
#        .device/shared/; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s18c
t0=$(date +%s)
device_round_gpu_tests
echo "tests done at $(( $(date +%s) - t0 )) s"
BATCHES="1 8 32 128" WEIGHTS="fp8 bf16" GRAPHS="1 0" timeout $(( 560 - ($(date +%s) - t0) )) \
  tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step" > "$W/step.txt" 2>&1
echo "sweep rc=$? at $(( $(date +%s) - t0 )) s"
# Whatever finished (a timed-out sweep writes no JSON): the bench with no batches only assembles the records.
[ -f "$W/step/decode-step.json" ] || BATCHES="" tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step" >> "$W/step.txt" 2>&1
grep -E "exit|skipped" "$W/step/bench.log" | head -40
python3 tools/decode_step_summary.py "$W/step/decode-step.json" 2>&1 | tail -n 60
rm -rf "$W"/step/runs/*/trace.json
device_round_pack
