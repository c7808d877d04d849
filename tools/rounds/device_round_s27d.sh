#!/usr/bin/env bash
# (Record of the call as run. The paired dequantization it measured was reverted in session 27: the st.shared::cluster
# form 1.4x slower (S27b/S27c); the bulk-copy form hung at >= 2 tiles per CTA (copies completed on the partner's
# buffer-0 barriers), fixed in S27g it was 11-13% slower; reports/2026-12-04-h200-kv-kernels.md.)
# Session 27, call S27d. S27c's probe: with per-thread st.shared::cluster stores of every dequantized chunk the paired
# producers' store phases took twice the unpaired ones (round 1 + reads 7255 vs 4028 cycles per tile, round 2 7313 vs
# 3627): the kernel 330.5 vs 232.8 us (probe build) at B 128 x 128 heads. Change: each CTA dequantizes its half into
# its own buffer only and producer thread 0 sends the half to the partner with 5 + 5 bulk copies (the TMA unit,
# cp.async.bulk.shared::cluster.shared::cta, 4 KB per panel slice, completing on the partner's full_lo / full);
# a `sent` barrier keeps WG1's next code copy off the half until the partner has received it. Predicted: producer
# phases ~half of unpaired, tile time set by the consumers (~4-4.5k cycles instead of ~6.7k): 128-head shapes -25..35%.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode mla_wgmma_probe; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s27d
GLM5_PROBE_PAIR=1 timeout 60 $BIN/mla_wgmma_probe > $W/probe_pair.txt 2>&1; echo "probe pair rc=$?"; sed -n '/H=128/,$p' $W/probe_pair.txt
F='Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/23:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/27:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/33:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/34:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/35'
device_round_test kernels_gpu_mla_decode 200 --gtest_filter="$F"
grep -E "paired dequantization" $W/kernels_gpu_mla_decode.log | sort | uniq -c
device_round_bench_mla 150
device_round_pack
