#!/usr/bin/env bash
# Session 30, call S30e (H200): issue 4's FP8-weight rows on this build (graphs on, the three KV paths per run) at
# batches 1, 8, 32 and 128 (tools/decode_step_bench.sh: context 32768, batch 128 at the largest context that fits),
# the first H200 step table since the fp16-operand MLA became the `fp8` path's default (session 28).
# Usage: tools/device_pack.sh build-lead glm5prof; .device/shared holding ../shared/golden and ../shared/configs;
#        run `bash THIS` with carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s30e
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
device_round_step "${STEP_BATCHES:-1 8 32 128}" "fp8" "1" "${STEP_TO:-480}" "moe.experts|attn.mla |attn.indexer.topk|attn.o_proj"
device_round_pack
