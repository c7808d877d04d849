#!/usr/bin/env bash
# Session 34, call S34f: 32-row K tiles in four buffers (GLM5_MLA_TILE32, probe build): the loop "consumers free a
# buffer -> the gather of its next codes -> the producers' dequantization" then spans four tiles instead of two
# (reports/2026-12-07-h100-mla-gather-s34.md predicts ~30% faster at B 128 x 64 heads). The phase probe, fp16
# operands, twice each: the library form ('') and _t32, with their check lines (against the mma.sync kernel).
# Usage: tools/probe/build.sh build-lead; tools/probe/build.sh build-lead mla_wgmma_probe_t32 -DGLM5_MLA_TILE32;
#        (cd build-lead && make kernels_gpu_mla_decode);
#        tools/device_pack.sh build-lead kernels_gpu_mla_decode mla_wgmma_probe mla_wgmma_probe_t32; run `bash THIS` with carry [".device"],
#        timeout 200
set -u
. tools/device_round_lib.sh
device_round_begin s34f
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
# The library's kernels changed machine code (buffer count and parities as constants of kBufs): its GPU tests first.
device_round_test kernels_gpu_mla_decode 150 --gtest_filter='Shapes/*:GpuMlaDecodeKernelChoice*'
for r in 1 2; do
  for v in "" _t32; do
    GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe$v > $W/probe$v-$r.txt 2>&1; echo "probe$v round $r rc=$?"
  done
done
for r in 1 2; do for v in "" _t32; do echo "== probe$v round $r"; grep -E '^B=|check' $W/probe$v-$r.txt; done; done
for v in "" _t32; do echo "== probe$v round 1, B 128 x 64"; grep -E '^B=128 H=64' -A4 $W/probe$v-1.txt | grep -E 'WG|producer'; done
tail -5 $W/probe_t32-1.txt
device_round_pack
