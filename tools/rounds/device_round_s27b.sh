#!/usr/bin/env bash
# (Record of the call as run. The paired dequantization it measured was reverted in session 27: the st.shared::cluster
# form 1.4x slower (S27b/S27c); the bulk-copy form hung at >= 2 tiles per CTA (copies completed on the partner's
# buffer-0 barriers), fixed in S27g it was 11-13% slower; reports/2026-12-04-h200-kv-kernels.md.)
# Session 27, call S27b. New: paired dequantization in the wgmma sparse MLA decode (MlaDecodeParams::wgmma_pair): at
# s_q H = 128 / 256 query heads the CTAs of 64-head blocks 2c and 2c + 1 run as a 2-CTA cluster and each dequantizes
# half of every 64-row tile into both CTAs' shared memory (st.shared::cluster, both CTAs' producers counted on full,
# both CTAs' consumers on empty). Predicted: the 128-head shapes were bound by the producers' dequantization (done twice
# per row), so -15..25% at B 64 / 128 x 128 heads and 128 x s_q 2 (S13j: 112.7 / 217.1 / 419.8 us; FlashMLA 100.5 /
# 192.5 / 366.2), bitwise the unpaired kernel's out and lse.
# Also: the MoE wgmma twin tests on the fixed scratch layout (S27a: the schedule had overlapped the k-split sums).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode kernels_gpu_moe_grouped; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s27b
device_round_test kernels_gpu_mla_decode 300
grep -E "paired dequantization" $W/kernels_gpu_mla_decode.log | sort | uniq -c
device_round_bench_mla 150
device_round_test kernels_gpu_moe_grouped 200 --gtest_filter='*Wgmma*'
grep -E "^moe (fp8|bf16) wgmma" $W/kernels_gpu_moe_grouped.log
device_round_pack
