#!/usr/bin/env bash
# Session 33, call S33a: the MLA crossover with its consumers' remote arrivals at CTA-scope release (mbar_arrive_cluster;
# S32a on an H100 saw the .release.cluster form 28% slower than no crossover: 291 against 228 us at B 128 x 128 heads).
# 1. the MLA GPU tests (crossover bitwise as without it, both operand forms); 2. the phase probe, fp16 operands, twice:
# the library form without crossover (''), with crossover (xo), and with crossover at .release.cluster (xorc, the S32a
# form). Then call S33b (device_round_s33b.sh, same pack): the MLA bench and FlashMLA beside it.
# Usage: (cd build-lead && make glm5prof kernels_gpu_mla_decode); tools/probe/build.sh build-lead;
#        tools/probe/build.sh build-lead mla_wgmma_probe_xorc -DGLM5_MLA_XO_RELEASE_CLUSTER;
#        tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode mla_wgmma_probe mla_wgmma_probe_xorc;
#        tools/flashmla_prepare.sh (as device_round_s32a.sh); run `bash THIS` with carry [".device"], timeout 590
set -u
. tools/device_round_lib.sh
device_round_begin s33a
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
device_round_test kernels_gpu_mla_decode 120 --gtest_filter='Shapes/*:GpuMlaDecodeKernelChoice*'
grep -E "crossover" $W/kernels_gpu_mla_decode.log | sort | uniq -c | head -4
for r in 1 2; do
  GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe > $W/probe-$r.txt 2>&1; echo "probe round $r rc=$?"
  GLM5_PROBE_XO=1 GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe > $W/probe_xo-$r.txt 2>&1; echo "probe xo round $r rc=$?"
  GLM5_PROBE_XO=1 GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe_xorc > $W/probe_xorc-$r.txt 2>&1; echo "probe xorc round $r rc=$?"
done
for r in 1 2; do for v in "" _xo _xorc; do echo "== probe$v round $r"
  grep -E 'B=128 H=128|B=64 H=256' -A4 $W/probe$v-$r.txt | grep -E 'B=|WG|producer'; done; done
device_round_pack
