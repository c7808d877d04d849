#!/usr/bin/env bash
# (Record of the call as run. The paired dequantization it measured was reverted in session 27: the st.shared::cluster
# form 1.4x slower (S27b/S27c); the bulk-copy form hung at >= 2 tiles per CTA (copies completed on the partner's
# buffer-0 barriers), fixed in S27g it was 11-13% slower; reports/2026-12-04-h200-kv-kernels.md.)
# Session 27, call S27e. S27d (bulk copies to the partner) hung at 32 tiles per CTA (B 3 x 8 tiles in check_mla
# passed): a producer announced the partner's bytes (arrive.expect_tx) only once its buffer was free, so the partner's
# copy could complete on the barrier before the announcement. Now each CTA announces tiles 0 / 1 before the opening
# cluster barrier and tile i + 2 from WG0's thread 0 before its warp's arrival on the partner's empty. Tight timeouts: the
# probe first, the rest only if it finishes.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode mla_wgmma_probe; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s27e
GLM5_PROBE_PAIR=1 timeout 25 $BIN/mla_wgmma_probe > $W/probe_pair.txt 2>&1; rc=$?; echo "probe pair rc=$rc"
sed -n '/H=128/,$p' $W/probe_pair.txt
if [ $rc -eq 0 ]; then
  F='Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/23:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/27:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/33:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/34:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/35'
  device_round_test kernels_gpu_mla_decode 120 --gtest_filter="$F"
  grep -E "paired dequantization" $W/kernels_gpu_mla_decode.log | sort | uniq -c
  device_round_bench_mla 130
fi
device_round_pack
