#!/usr/bin/env bash
# Session 34, call S34c: issue 4's FP8 rows (graphs on, the three KV paths per run) at the batches in STEP_BATCHES
# (default "1 8") on this build -- the H200's batch-1 number of record is session 26's (S26b), from before the fp16-
# operand MLA became the fp8 path's default (session 28). Any GPU: on an 80 GB card POOL_MIN=280000.
# Usage: (cd build-lead && make glm5prof); tools/device_pack.sh build-lead glm5prof; run `bash THIS` with carry
#        [".device"], timeout 400
set -u
. tools/device_round_lib.sh
device_round_begin s34c
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
if (( ${mib:-0} < 100000 )); then export POOL_MIN=${POOL_MIN:-280000}; echo "80 GB card: pool $POOL_MIN"; fi
device_round_step "${STEP_BATCHES:-1 8}" "fp8" "1" "${STEP_TO:-300}" "moe.experts|attn.mla |attn.indexer.topk|attn.o_proj"
device_round_pack
