#!/usr/bin/env bash
# Session 21, call S21f: the final defaults (--absorb-after-score on, the rest of session 21's options off).
# (1) engine_gpu_graph whole (S21e: GraphLevelTracingThenNodeLevelAttribution failed since session 20 flipped
# moe_gate_fused's default and the test helper kept the old one; AbsorbAfterScore failed by <= 255 ns of CUPTI
# timestamps beside other test processes: both mended), kernels_gpu_moe and engine_gpu_golden again; (2) issue 4's
# FP8-weight rows: BATCHES="1 8 32 128" WEIGHTS=fp8 GRAPHS="1 0" tools/decode_step_bench.sh.
# Usage: tools/device_pack.sh build-lead glm5prof engine_gpu_graph engine_gpu_golden kernels_gpu_moe; .device/shared
#        as in S21a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s21f
timeout 200 $BIN/engine_gpu_graph > $W/graph.log 2>&1
echo "engine_gpu_graph rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/graph.log | tr '\n' ' ')"
grep -hE "Failure|absorptions|FAILED  \]" $W/graph.log | head -10
export GLM5_BINARY_DIR=$BIN
timeout 100 $BIN/engine_gpu_golden > $W/golden.log 2>&1
echo "engine_gpu_golden rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/golden.log | tr '\n' ' ')"
timeout 100 $BIN/kernels_gpu_moe > $W/moe.log 2>&1
echo "kernels_gpu_moe rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/moe.log | tr '\n' ' ')"
device_round_step "1 8 32 128" fp8 "1 0" 330 "attn.q_absorb|attn.indexer.score|attn.indexer.topk"
device_round_pack
