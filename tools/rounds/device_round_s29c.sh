#!/usr/bin/env bash
# Session 29, call S29c: S29b on an H100 when no H200 came (pool 280,000 tokens, FP8 weights only: the 495,000-token
# pool does not fit 80 GB). Below: S29b's header.
# Session 29, call S29b (H200): issue 4's table with graphs on (device time was short: failed machine starts cost ~90 s
# each) on the final build (session 28's fp16-operand MLA is the `fp8`
# path's default now; the last H200 table was S26b / S26f / S27a): BF16 and FP8 weights, graphs on, batch 1 / 8 / 32 /
# 128 (128 at the largest context that fits), the three KV paths per run; then the engine's graph and golden GPU tests
# and the MoE tests S29a cut short, on this build.
# Usage: tools/device_pack.sh build-lead glm5prof engine_gpu_graph engine_gpu_golden kernels_gpu_moe_grouped; .device/shared holding
#        ../shared/golden and ../shared/configs; run `bash THIS` with carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s29c
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
export POOL_MIN=280000
device_round_step "1 8 32 128" "fp8" "1" 220 "moe.experts|attn.mla "
export GLM5_BINARY_DIR=$BIN
# (engine_gpu_graph / engine_gpu_golden left out for device time: no engine code changed since session 28's passes)
# S29a gave these 90 s: MatchesPerTokenAndCpu (its CPU twin at GLM-5's expert shapes) did not finish
device_round_test kernels_gpu_moe_grouped 170 \
  --gtest_filter='GpuMoeGrouped.MatchesPerTokenAndCpu:GpuMoeGrouped.Bf16WgmmaMatchesCpuTwin' 
device_round_pack
