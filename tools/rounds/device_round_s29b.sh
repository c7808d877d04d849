#!/usr/bin/env bash
# Session 29, call S29b (H200): issue 4's table on the final build (session 28's fp16-operand MLA is the `fp8` path's
# default now; the last H200 table was S26b / S26f / S27a): FP8 weights, graphs on, batch 1 / 8 / 32 / 128 (128 at the
# largest context that fits), the three KV paths per run -- cut to this because failed machine starts (~90-100 s of
# device time each) left ~640 s; then the MoE tests S29a cut short.
# Usage: tools/device_pack.sh build-lead glm5prof engine_gpu_graph engine_gpu_golden kernels_gpu_moe_grouped;
#        .device/shared holding ../shared/golden and ../shared/configs; run `bash THIS` with carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s29b
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
device_round_step "1 8 32 128" "fp8" "1" 220 "moe.experts|attn.mla "
export GLM5_BINARY_DIR=$BIN
# (engine_gpu_graph / engine_gpu_golden left out for device time: no engine code changed since session 28's passes)
# S29a gave these 90 s: MatchesPerTokenAndCpu (its CPU twin at GLM-5's expert shapes) did not finish
device_round_test kernels_gpu_moe_grouped 170 \
  --gtest_filter='GpuMoeGrouped.MatchesPerTokenAndCpu:GpuMoeGrouped.Bf16WgmmaMatchesCpuTwin' 
device_round_pack
