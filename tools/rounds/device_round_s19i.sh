#!/usr/bin/env bash
# Session 19, call S19i: issue 4's batch-1 FP8-weight rows on the final code (the GEMV fold with the late grid
# trigger), graphs on and off: BATCHES=1 WEIGHTS=fp8 GRAPHS="1 0" tools/decode_step_bench.sh.
# Usage: tools/device_pack.sh build-lead glm5prof; .device/shared as in S19a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s19i
device_round_step 1 fp8 "1 0" 300 "attn.qkv_a_proj|attn.q_up_proj|attn.indexer.score"
device_round_pack
