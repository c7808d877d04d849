#!/usr/bin/env bash
# Session 19, call S19b: the folded input norm, second form (S19a's first form made the batch-1 step slower: each warp
# scaled x by the norm weight per chunk, 1.5x the L1 bytes; now each CTA stages x * weight in shared memory once).
# (1) The decode step at batch 1 (GLM-5, FP8 weights, fp8 path, graphs, 32K context), --gemv-fold on (A) / off (B),
# A B B A (--gemv-fold since S19d). (2) The GPU tests of the change: kernels_gpu_linear_fp8, engine_gpu_graph, engine_gpu_fp8_weights,
# engine_gpu_golden.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8 engine_gpu_graph engine_gpu_fp8_weights
#        engine_gpu_golden; .device/shared as in S19a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s19b
OPS="attn.norm|attn.q_a_norm|attn.qkv_a_proj|attn.q_up_proj|attn.prologue|moe.experts"
device_round_ab "$OPS" "A B B A" "--gemv-fold on" "--gemv-fold off"
device_round_gpu_tests
grep -h -E "group \+ input norm|gemv_norm on" $W/tests/*.log 2>/dev/null | head -40
device_round_pack
