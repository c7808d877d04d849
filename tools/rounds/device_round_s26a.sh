#!/usr/bin/env bash
# Session 26, call S26a. Session 25's last build (gate_up's k split chosen by the plan) never ran its step rows, and
# its records were lost with the session's machine; S25d's bench showed the split slower at every batch (batch 8
# 568.8 / 573.8 us unsplit / split, 32 1535.1 / 1540.0, 128 2506.4 / 2545.2), so the plan now never splits (forced
# only: MoeExpertsParams::wgmma_ksplit = 2).
# The MoE wgmma GPU test (both splits, bitwise twice), the graph and golden tests, the MoE bench (wgmma vs mma.sync,
# the forced split), then issue 4's FP8-weight rows at batch 1 / 8 / 32 / 128 (graphs on; the three KV paths per run).
# Predicted from S25c's A/B: batch 128 ~230 ms (S25a 239.1), batch 32 ~142 (S25a 144.3), batch 8 ~59.4, batch 1
# unchanged (~17.5: batch 1 has no grouped MoE).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_grouped engine_gpu_graph engine_gpu_golden;
#        .device/shared holding ../shared/golden and ../shared/configs; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s26a
device_round_test kernels_gpu_moe_grouped 150 --gtest_filter='*Wgmma*'
grep -E "^moe fp8 wgmma" $W/kernels_gpu_moe_grouped.log
device_round_test engine_gpu_graph 150
device_round_test engine_gpu_golden 120
device_round_bench_moe
device_round_step "1 8 32 128" fp8 "1" 330 "moe.experts|attn.mla|attn.o_proj"
device_round_pack
