#!/usr/bin/env bash
# Session 19, call S19h: the decisive A/B of the GEMV fold on the final code (NORM kernels letting the next grid in
# after their main loop, S19g): batch-1 step (GLM-5, FP8 weights, fp8 path, graphs, 32K), --gemv-fold on (A) / off
# (B), eight processes in the order A B B A A B B A (the spread between processes, +-0.25 ms, is larger than the
# effect measured so far: -0.05 to -0.2 ms).
# Usage: tools/device_pack.sh build-lead glm5prof; .device/shared as in S19a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s19h
OPS="attn.qkv_a_proj|attn.q_up_proj|attn.indexer.score|attn.norm|attn.q_a_norm|attn.rope"
device_round_ab "$OPS" "A B B A A B B A" "--gemv-fold on" "--gemv-fold off"
device_round_pack
