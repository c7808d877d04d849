#!/usr/bin/env bash
# Session 27, call S27g. A read-only review of S27d-S27f's paired MLA form found the hang: send_half completed every
# bulk copy on the partner's full_lo[0] / full[0] whatever the buffer (n = 1 used only buffer 0). Fixed (bars + buf);
# the sent arrival moved after WG0's commit / wait; a 2-tile paired test case. First the MoE twin tests on the final
# MoE build (review mends: the schedule region poisoned before the checked call, a 300-local-expert case), then the
# paired probe, the paired test cases, the MLA bench (unpaired and *_wgmma_pair side by side).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode kernels_gpu_moe_grouped mla_wgmma_probe
set -u
. tools/device_round_lib.sh
device_round_begin s27g
device_round_test kernels_gpu_moe_grouped 220 --gtest_filter='*Wgmma*'
grep -E "^moe (fp8|bf16) wgmma" $W/kernels_gpu_moe_grouped.log | tail -4
GLM5_PROBE_PAIR=1 timeout 25 $BIN/mla_wgmma_probe > $W/probe_pair.txt 2>&1; rc=$?; echo "probe pair rc=$rc"
sed -n '/H=128/,$p' $W/probe_pair.txt
if [ $rc -eq 0 ]; then
  F=$(for i in 23 27 33 34 35 36; do printf 'Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/%s:' $i; done)
  device_round_test kernels_gpu_mla_decode 120 --gtest_filter="$F"
  grep -E "paired dequantization" $W/kernels_gpu_mla_decode.log | sort | uniq -c
  device_round_bench_mla 120
fi
device_round_pack
