#!/usr/bin/env bash
# Session 32, call S32a: the MLA wgmma kernel's crossover form (MlaDecodeParams::crossover = 2: head-block pairs as
# clusters, each CTA producing half of every tile into both) and session 30's two P . V forms. 1. kernels_gpu_wgmma and
# the MLA GPU tests (crossover: bitwise as without it in both operand forms, refused where it has no form); 2. the phase
# probe, fp16 operands: the library form, the m64n128 P . V (_n128), WG0's register-P P . V (_rs), both (_both), and
# the library form with crossover at 128 / 256 heads (GLM5_PROBE_XO), in A B C D E order, twice.
# Then call S32b (device_round_s32b.sh): the MLA bench with the crossover rows (_xo) and FlashMLA beside it.
# Usage: tools/probe/build.sh build-lead; tools/probe/build.sh build-lead mla_wgmma_probe_n128 -DGLM5_MLA_PV_N128;
#        tools/probe/build.sh build-lead mla_wgmma_probe_rs -DGLM5_MLA_WG0_PV_RS;
#        tools/probe/build.sh build-lead mla_wgmma_probe_both -DGLM5_MLA_PV_N128 -DGLM5_MLA_WG0_PV_RS;
#        tools/device_pack.sh build-lead glm5prof kernels_gpu_wgmma kernels_gpu_mla_decode mla_wgmma_probe
#        mla_wgmma_probe_n128 mla_wgmma_probe_rs mla_wgmma_probe_both; tools/flashmla_prepare.sh
#        /work/.mirror/deepseek-ai+FlashMLA/repo /work/.mirror/NVIDIA+cutlass/repo; run `bash THIS` with carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s32a
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
device_round_test kernels_gpu_mla_decode 240 --gtest_filter='Shapes/*:GpuMlaDecodeKernelChoice*'
grep -E "crossover" $W/kernels_gpu_mla_decode.log | sort | uniq -c | head -8
device_round_test kernels_gpu_wgmma 60
for r in 1 2; do
  for v in "" _n128 _rs _both xo; do
    if [[ $v == xo ]]; then GLM5_PROBE_XO=1 GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe > $W/probe_xo-$r.txt 2>&1
    else GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe$v > $W/probe$v-$r.txt 2>&1; fi
    echo "probe $v round $r rc=$?"
  done
done
for r in 1 2; do for v in "" _n128 _rs _both _xo; do echo "== probe$v round $r (fp16 operands; '' = the library form)"
  grep -E 'B=|check' $W/probe$v-$r.txt | head -8; done; done
device_round_pack
