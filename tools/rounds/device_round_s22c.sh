#!/usr/bin/env bash
# Session 22, call S22c: the final build's checks and issue 4's FP8-weight table. (1) Every GPU test executable
# (tools/device_tests.sh, 4 at a time; kernels_gpu_moe_grouped set aside: MoE code unchanged since S18b); (2) the whole FP8-weight
# sweep on the final defaults (gathered top-k, the score kernel's first-digit histogram):
# BATCHES="1 8 32 128" WEIGHTS=fp8 GRAPHS="1 0" tools/decode_step_bench.sh; (3) --topk-cluster 4 against the automatic 8
# at batch 1 with the gathered form (probe: 13.5 against 13.1 us alone; a cluster of 4 finds free SMs sooner after the
# score kernel's blocks), 8 processes.
# Usage: XZ_OPT="-9 -T1" tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; .device/shared as in S22a;
#        run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s22c
device_round_gpu_tests

device_round_step "1 8 32 128" fp8 "1 0" 330 "attn.indexer.score|attn.indexer.topk|attn.mla"
device_round_ab "attn.indexer.topk|attn.indexer.score|attn.mla" "A B B A A B B A" "--topk-cluster 4" "--topk-cluster 0"
device_round_pack
