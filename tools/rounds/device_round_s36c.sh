#!/usr/bin/env bash
# Session 36, call S36c: the batch-1 GEMVs' L2 lookahead (LinearContext::fp8_gemv_l2_lookahead, --gemv-l2-lookahead N:
# each warp asks L2 for its rows' weights N 1024-column steps ahead of its loads). S36b's Nsight Compute had them at
# 32% (qkv_a, 17 MB, 15.9 us), 56% (q_up, 42 MB, 23.5 us) and 72% (o_proj, 101 MB, 42.5 us) of DRAM peak, stalled on
# their loads (long scoreboard). Predicted: o_proj (8 steps per warp) gains most, -2 to -5 us per layer; qkv_a (1.5
# steps) and q_up (2) little. Also the TMA-fed GEMV for single projections (--fp8-gemv tma: o_proj at batch 1),
# never measured in the step. Tests first (the lookahead changes no bit), then batch 1 rotated: base, la 2, la 4, tma.
# Usage: (cd build-lead && make glm5prof kernels_gpu_linear_fp8); tools/device_pack.sh build-lead glm5prof
#        kernels_gpu_linear_fp8; run `bash THIS` with carry [".device"], timeout 450
set -u
. tools/device_round_lib.sh
device_round_begin s36c
device_round_card
device_round_test kernels_gpu_linear_fp8 60 --gtest_filter='*Lookahead*:*InputNorm*' ||
  { echo "GEMV tests failed: no timing"; device_round_pack; exit 0; }
OPS="attn.qkv_a_proj|attn.q_up_proj|attn.o_proj"
for round in 1; do
  device_round_profile b1-$round-base 1 32768 "$OPS"
  device_round_profile b1-$round-la2 1 32768 "$OPS" --gemv-l2-lookahead 2
  device_round_profile b1-$round-la4 1 32768 "$OPS" --gemv-l2-lookahead 4
  device_round_profile b1-$round-tma 1 32768 "$OPS" --fp8-gemv tma
done
for r in b1-1-base b1-1-la2 b1-1-la4 b1-1-tma; do echo "== $r"; device_round_layer_timeline $W/$r | sed -n '2p;5p;13p'; done
device_round_pack
