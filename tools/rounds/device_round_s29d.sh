#!/usr/bin/env bash
# Session 29, call S29d: what ~350 s of device time left after repeated failed machine starts could hold -- issue 4's FP8
# rows (graphs on, the three KV paths per run) at the batches in STEP_BATCHES (default "1 128"), then the MoE tests
# S29a cut short (MatchesPerTokenAndCpu: its CPU twin at GLM-5's expert shapes; the wgmma plan is now computed once per
# call). Any GPU: on an H100 set POOL_MIN=280000 (the 495,000-token pool does not fit 80 GB).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_grouped; run `bash THIS` with carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s29d
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
if (( ${mib:-0} < 100000 )); then export POOL_MIN=${POOL_MIN:-280000}; echo "80 GB card: pool $POOL_MIN"; fi
device_round_step "${STEP_BATCHES:-1 128}" "fp8" "1" "${STEP_TO:-140}" "moe.experts|attn.mla "
device_round_test kernels_gpu_moe_grouped "${MOE_TO:-140}" \
  --gtest_filter='GpuMoeGrouped.MatchesPerTokenAndCpu:GpuMoeGrouped.Bf16WgmmaMatchesCpuTwin'
device_round_pack
