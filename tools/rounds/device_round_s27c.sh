#!/usr/bin/env bash
# (Record of the call as run. The paired dequantization it measured was reverted in session 27: the st.shared::cluster
# form 1.4x slower (S27b/S27c); the bulk-copy form hung at >= 2 tiles per CTA (copies completed on the partner's
# buffer-0 barriers), fixed in S27g it was 11-13% slower; reports/2026-12-04-h200-kv-kernels.md.)
# Session 27, call S27c. S27b: paired dequantization ran 38-40% SLOWER than unpaired (B 128 x 128 heads 304.8 vs 218.4
# us) and was bitwise equal except at S = 2 (chunk merge vs combine: expected, the test now allows it). Change: one
# remote mbarrier arrival per warp (count 32) instead of one per thread (768 -> 24 per tile per CTA). Where the time
# goes: tools/probe/mla_wgmma_probe's phase cycles, unpaired and paired (GLM5_PROBE_PAIR), then the pair test cases.
# Usage: tools/device_pack.sh build-lead kernels_gpu_mla_decode mla_wgmma_probe; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s27c
timeout 60 $BIN/mla_wgmma_probe > $W/probe.txt 2>&1; echo "probe rc=$?"; cat $W/probe.txt
GLM5_PROBE_PAIR=1 timeout 60 $BIN/mla_wgmma_probe > $W/probe_pair.txt 2>&1; echo "probe pair rc=$?"; cat $W/probe_pair.txt
F='Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/23:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/27:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/33:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/34:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/35'
device_round_test kernels_gpu_mla_decode 200 --gtest_filter="$F"
grep -E "paired dequantization" $W/kernels_gpu_mla_decode.log | sort | uniq -c
device_round_pack
