#!/usr/bin/env bash
# Session 22, call S22c: the final build's checks and issue 4's FP8-weight table. (1) Every GPU test executable
# (tools/device_tests.sh, 4 at a time; kernels_gpu_moe_grouped set aside: MoE code unchanged since S18b); (2) the whole FP8-weight
# sweep on the final defaults (gathered top-k, the score kernel's first-digit histogram):
# BATCHES="1 8 32 128" WEIGHTS=fp8 GRAPHS="1 0" tools/decode_step_bench.sh.
# Usage: XZ_OPT="-9 -T1" tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; .device/shared as in S22a;
#        run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s22c
device_round_gpu_tests

device_round_step "1 8 32 128" fp8 "1 0" 330 "attn.indexer.score|attn.indexer.topk|attn.mla"
device_round_pack
