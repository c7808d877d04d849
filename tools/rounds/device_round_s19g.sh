#!/usr/bin/env bash
# Session 19, call S19g: the GEMV fold's kernels (the NORM instances: attn.qkv_a_proj and attn.q_up_proj at batch 1)
# let the next grid in after their main loop instead of at their start. S19e / S19f traces: q_up's 1280 CTAs,
# launched early under PDL, parked on every SM while qkv_a ran, and the side stream's weights_proj and KV prologue
# (which attn.indexer.score waits for) started 16 us late; the side-stream priority did not change that (S19f).
# Predicted: -2 to -4 us per layer with the fold on (-0.15 to -0.3 ms per step) against S19f's fold-on steps.
# (1) Batch-1 step (GLM-5, FP8 weights, fp8 path, graphs, 32K): --gemv-fold on (A) / off (B), A B B A. (2) One trace
# (fold on). (3) kernels_gpu_linear_fp8 and the engine's GPU tests.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8 engine_gpu_graph engine_gpu_golden
#        engine_gpu_fp8_weights; .device/shared as in S19a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s19g
OPS="attn.qkv_a_proj|attn.q_up_proj|attn.indexer.weights_proj|attn.prologue|attn.indexer.score"
device_round_ab "$OPS" "A B B A" "--gemv-fold on" "--gemv-fold off"
device_round_trace b1-trace-A
device_round_gpu_tests
device_round_pack
