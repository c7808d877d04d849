#!/usr/bin/env bash
# (Record of a session-16 call. Its subject, EngineOptions::norm_fuse / profile --norm-fuse, was measured slower in
# all three forms and reverted; the code is in commit 0774adc: reports/2026-12-01-h200-decode-step.md, session 16.)
# Session 16, call S16a: attn.norm / attn.q_a_norm inside the batch-1 FP8 GEMV groups (LinearGroupParams::norm_weight,
# EngineOptions::norm_fuse). S13k's batch-1 op table: attn.norm 395 us and attn.q_a_norm 396 us per step (78 layers,
# ~5 us each: launch + one latency-bound row), predicted saving ~0.5 ms of the ~0.79 ms (each GEMV CTA pays one L2
# read of the x row and a block reduction, behind its first weight loads).
#  1. kernels_gpu_linear_fp8 (the new bitwise test with the other GEMV / group tests), kernels_gpu_norm;
#  2. engine_gpu_graph (the new engine test: fused vs separate norms, bitwise logits, eager and graph), the
#     golden and FP8-weight engine tests (the default is now fused at batch 1);
#  3. the decode step at batch 1, --norm-fuse on (A) against off (B), order A B B A, context 32768.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8 kernels_gpu_norm engine_gpu_graph
#        engine_gpu_golden engine_gpu_fp8_weights; shared/golden + configs in .device/shared; run `bash THIS`,
#        carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin "${S16_TAG:-s16a}"  # S16b and S16c ran these steps under their own tags
for t in kernels_gpu_linear_fp8 kernels_gpu_norm engine_gpu_golden engine_gpu_fp8_weights engine_gpu_graph; do
  timeout 200 $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$?"
  grep -E "^\[  (PASSED|FAILED) |Failure|Expected|Which is" $W/$t.log | head -12
done
grep -E "fused RMSNorm|attn.norm .* kernels" $W/kernels_gpu_linear_fp8.log $W/engine_gpu_graph.log | head -20
OPS="attn.norm|attn.q_a_norm|attn.qkv_a_proj|attn.q_up_proj|attn.q_b_proj|attn.indexer.weights_proj"
r=0; for x in A B B A; do r=$((r + 1))
  if [ $x = A ]; then device_round_profile b1-$r-A 1 32768 "$OPS" --norm-fuse on; else device_round_profile b1-$r-B 1 32768 "$OPS" --norm-fuse off; fi
done
device_round_pack
