#!/usr/bin/env bash
# Session 26, call S26f. S26b: with BF16 weights moe.experts is 86-94% of the batch 8-128 step and streams at 58-62% of
# the copy rate (the mma.sync grouped kernels). New: the TMA-fed expert kernels for BF16 weights (bf16 slot rows, 4
# wgmma m64nNk16 per 64-column unit straight into fp32 sums; `--moe-wgmma on` now covers BF16). Predicted from the
# FP8 kernels (88-94% of copy): BF16 moe.experts ~1.5x faster, batch 128 step 617 -> ~420 ms, batch 32 380 -> ~260,
# batch 8 152 -> ~110.
# The GPU tests (FP8 and BF16 wgmma twins, graph), the MoE bench, then issue 4's BF16 rows at batch 8 / 32 / 128
# (graphs). (The first attempt lost its machine mid-call; this one trimmed to the session's last 316 s of device time.)
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_grouped engine_gpu_graph engine_gpu_golden;
#        .device/shared holding ../shared/golden and ../shared/configs; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s26f
device_round_test kernels_gpu_moe_grouped 200 --gtest_filter='*Wgmma*'
grep -E "^moe (fp8|bf16) wgmma" $W/kernels_gpu_moe_grouped.log
device_round_test engine_gpu_graph 90
device_round_bench_moe
device_round_step "8 32 128" bf16 "1" 100 "moe.experts"
device_round_pack
