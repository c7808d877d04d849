#!/usr/bin/env bash
# Session 30, call S30a: the FP8 code multicast of the wgmma MLA kernel (MlaDecodeParams::multicast; clusters of 2 /
# 4 head-block CTAs sharing each tile's code copies). 1. the MLA GPU tests (every Shapes case now also runs the fp16
# form with the multicast off / 2 / 4 and wants the same bits; a 256-query-head case added); 2. the phase probe,
# fp16 form, multicast auto (2 above 64 heads) and off.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode mla_wgmma_probe; run `bash THIS` (carry .device)
set -u
. tools/device_round_lib.sh
device_round_begin s30a
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
device_round_test kernels_gpu_mla_decode 200 --gtest_filter='Shapes/*:GpuMlaDecodeKernelChoice*'
grep -E "code multicast" $W/kernels_gpu_mla_decode.log | sort | uniq -c | head -8
for mc in 0 1; do
  GLM5_PROBE_F16=1 GLM5_PROBE_MC=$mc timeout 40 $BIN/mla_wgmma_probe > $W/probe_mc$mc.txt 2>&1; echo "probe mc=$mc rc=$?"
done
for mc in 0 1; do echo "== probe, fp16 operands, multicast request $mc"; grep -E 'B=|producer|WG0|WG1|check' $W/probe_mc$mc.txt | head -28; done
device_round_pack
