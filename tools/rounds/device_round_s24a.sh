#!/usr/bin/env bash
# Session 24, call S24a: every GPU test executable on session 23's final build (HEAD df2e30e), which the GPU has not
# run as a whole (the FP8 tensor-core GEMM's new cases, the moved quantization, the shared buffers).
# Usage: XZ_OPT="-9 -T1" tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; .device/shared as in S23a;
# `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s24a
device_round_gpu_tests
device_round_moe_grouped_alone
device_round_pack
