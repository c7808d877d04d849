#!/usr/bin/env bash
# Session 23, call S23g. S23f's two temporaries (N <= 64) were slower in the bench (o_proj m = 64: 59.9 against 47.7 us):
# reverted to one temporary. The final build's FP8 tensor-core GEMM test and issue 4's FP8-weight rows at batch 32
# and 128 (graphs; batch 1 and 8 do not run this kernel: S23f's rows stand for them).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8; .device/shared as in S23a; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s23g
device_round_test kernels_gpu_linear_fp8 120 --gtest_filter='*Wgmma*'
device_round_step "32 128" fp8 "1" 200 "attn.o_proj|attn.q_b_proj|moe.shared.gate_up"
device_round_pack
