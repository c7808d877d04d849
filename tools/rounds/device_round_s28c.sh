#!/usr/bin/env bash
# Session 28, call S28c: S28b's build with the producers' scales and rope of tile i + 1 loaded at the end of tile i
# (S28b's probe: [24] round 1 still waiting for them). S28b was S28a's build mended: the rope's fp16 conversion at its store, not at its load, which S28a's
# probe showed waiting out the load; the bench's check of the fp16 form with its delta bound). The wgmma MLA kernel with fp16 operands for FP8 rows (MlaDecodeKernel::WgmmaF16: one
# convert + one fp16 multiply per code pair instead of three instructions per code). The MLA GPU tests (every
# shape: the fp16 form against the twin's bounds, the bf16 form unchanged), the phase probe in both forms, then the
# MLA bench (mla_decode_fp8_wgmma and mla_decode_fp8_wgmma_f16 side by side).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode mla_wgmma_probe
set -u
. tools/device_round_lib.sh
device_round_begin s28c
timeout 30 $BIN/mla_wgmma_probe > $W/probe_bf16.txt 2>&1; echo "probe bf16 rc=$?"
GLM5_PROBE_F16=1 timeout 30 $BIN/mla_wgmma_probe > $W/probe_f16.txt 2>&1; rc=$?; echo "probe f16 rc=$rc"
paste -d'\n' $W/probe_bf16.txt $W/probe_f16.txt | grep -E 'B=|producer|WG0|check' | head -40
if [ $rc -eq 0 ]; then
  device_round_test kernels_gpu_mla_decode 200 --gtest_filter='Shapes/*:GpuMlaDecodeKernelChoice*'
  grep -E "wgmma fp16 operands" $W/kernels_gpu_mla_decode.log | head -40
  device_round_bench_mla 150
fi
device_round_pack
