#!/usr/bin/env bash
# Session 27, call S27a. Change: moe_group_kernel writes the TMA-fed experts' slot-row schedule (MoeSlotSchedule: R, the
# token-tile starts U, each slot row's source pair) in the pass that buckets the pairs; the two slot-row quantizations
# read each row's source (no per-CTA scan of the bucket offsets, no binary search) and the GEMMs' schedule() loads R and
# U (no per-CTA warp scan). Predicted: quantization launches -1..2 us each, the GEMMs' prologue ~-1 us: -3..5 us per MoE
# layer at batch 8 / 32 / 128 (-0.2..0.4 ms per step); outputs unchanged.
# Also the checks left over from session 26 on this build: the FP8 / BF16 wgmma twin tests (now also checking the
# schedule against the buckets), engine_gpu_golden and engine_gpu_graph.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_grouped engine_gpu_graph engine_gpu_golden;
#        .device/shared holding ../shared/golden and ../shared/configs; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s27a
device_round_test kernels_gpu_moe_grouped 240 --gtest_filter='*Wgmma*:*MatchesPerTokenAndCpu*'
grep -E "^moe (fp8|bf16) wgmma" $W/kernels_gpu_moe_grouped.log
device_round_test engine_gpu_golden 150
device_round_test engine_gpu_graph 100
device_round_bench_moe
device_round_step "8 32 128" fp8 "1" 110 "moe.experts"
device_round_pack
