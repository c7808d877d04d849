#!/usr/bin/env bash
# Session 19, call S19j: the review mends (no behaviour change meant: the GEMV's scaling loop, split helpers, the
# engine's group_fold) on the GPU: kernels_gpu_linear_fp8 and the engine's GPU tests, and one batch-1 step.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8 engine_gpu_graph engine_gpu_golden
#        engine_gpu_fp8_weights; .device/shared as in S19a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s19j
device_round_profile b1 1 32768 "attn.qkv_a_proj|attn.q_up_proj|attn.rope|attn.q_a_norm"
device_round_gpu_tests
device_round_pack
