#!/usr/bin/env bash
# Session 21, call S21d (the last of the session): every GPU test executable on the final build (tools/device_tests.sh,
# 4 at a time; kernels_gpu_moe_grouped's long PairDown test alone), then issue 4's batch-1 FP8-weight rows on the
# final defaults: BATCHES=1 WEIGHTS=fp8 GRAPHS="1 0" tools/decode_step_bench.sh.
# Usage: tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; .device/shared as in S21a;
#        run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s21d
device_round_gpu_tests
device_round_moe_grouped_alone
device_round_step 1 fp8 "1 0" 200 "attn.q_absorb|attn.prologue|attn.indexer.score|attn.indexer.topk"
device_round_pack
