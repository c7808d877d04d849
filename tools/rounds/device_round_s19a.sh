#!/usr/bin/env bash
# Session 19, call S19a: the input RMSNorm folded into the batch-1 FP8 GEMV (EngineOptions::gemv_norm,
# LinearGroupParams::norm). (1) The decode step at batch 1 (GLM-5, FP8 weights, fp8 path, graphs, 32K context),
# --gemv-fold on (A) / off (B), A B B A: predicted -0.4 to -0.6 ms per step (attn.norm 395 + attn.q_a_norm 396 us per
# step of launches leave the main chain; the GEMVs gain < 1 us each). (2) Every GPU test executable
# (tools/device_tests.sh, 4 at a time), with the new GpuLinearFp8.GroupWithInputNormMatchesNormThenProduct and
# GraphGpu.GemvNormFoldedMatchesSeparateNorms (both renamed in S19d; the option is now --gemv-fold, which also folds attn.rope).
# Usage: tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; mkdir -p .device/shared &&
#        cp -r ../shared/golden ../shared/configs .device/shared/; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s19a
OPS="attn.norm|attn.q_a_norm|attn.qkv_a_proj|attn.q_up_proj|attn.prologue|attn.indexer.weights_proj"
device_round_ab "$OPS" "A B B A" "--gemv-fold on" "--gemv-fold off"
device_round_gpu_tests
grep -h -E "group \+ input norm|gemv_norm on" $W/tests/*.log 2>/dev/null | head -40
device_round_pack
