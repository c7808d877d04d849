#!/usr/bin/env bash
# (Record of a session-16 call. Its subject, EngineOptions::norm_fuse / profile --norm-fuse, was measured slower in
# all three forms and reverted; the code is in commit 0774adc: reports/2026-12-01-h200-decode-step.md, session 16.)
# Session 16, call S16c (S16a again after the change below): attn.norm / attn.q_a_norm inside the batch-1 FP8 GEMV groups (LinearGroupParams::norm_weight,
# EngineOptions::norm_fuse). S13k's batch-1 op table: attn.norm 395 us and attn.q_a_norm 396 us per step (78 layers,
# ~5 us each: launch + one latency-bound row), predicted saving ~0.5 ms of the ~0.79 ms (each GEMV CTA pays one L2
# read of the x row and a block reduction, behind its first weight loads).
# S16a measured the first version (every CTA summing the whole row from global memory) at +4.4 / +3.0 us per layer
# in the two GEMVs: no gain; S16b (the sum computed once by the first CTAs, the others polling a counter) +11 / +13 us
# and a counter-layout bug. Now each CTA copies the row into shared memory with one batch of cp.async and sums it
# there: predicted +2.9 / +1.3 us (L2 traffic 16.5 / 10 MB), a saving of ~0.45 ms per step.
#  1. kernels_gpu_linear_fp8 (the new bitwise test with the other GEMV / group tests), kernels_gpu_norm;
#  2. engine_gpu_graph (the new engine test: fused vs separate norms, bitwise logits, eager and graph), the
#     golden and FP8-weight engine tests (the default is now fused at batch 1);
#  3. the decode step at batch 1, --norm-fuse on (A) against off (B), order A B B A, context 32768.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8 kernels_gpu_norm engine_gpu_graph
#        engine_gpu_golden engine_gpu_fp8_weights; shared/golden + configs in .device/shared; run `bash THIS`,
#        carry [".device"]
S16_TAG=s16c exec bash tools/rounds/device_round_s16a.sh  # the same steps; the code measured is the checkout's
