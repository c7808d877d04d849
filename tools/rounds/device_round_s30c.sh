#!/usr/bin/env bash
# Session 30, call S30c: P . V as two m64n128k16 per k-step instead of four m64n64k16 (P's slice read once per 128
# value dims instead of per 64). 1. kernels_gpu_wgmma (the new m64n128 MN-major test) and the MLA GPU tests (the
# library's m64n64 form); 2. the phase probe, fp16 form: the library form against the m64n128 form
# (mla_wgmma_probe_n128, -DGLM5_MLA_PV_N128) and WG0's P . V with P from registers (mla_wgmma_probe_rs,
# -DGLM5_MLA_WG0_PV_RS) and both (mla_wgmma_probe_both, session 31), in A B C D A B C D order (each probe also checks its output against the mma.sync kernel);
# 3. `glm5prof bench kernels --only mla --reps 20` and FlashMLA's sparse FP8 decode from its public source beside it
# (left out with S30_TESTS_ONLY=1: steps 1 and 2 alone, any sm_90 GPU, glm5prof need not be packed).
# Usage: tools/probe/build.sh build-lead; tools/probe/build.sh build-lead mla_wgmma_probe_n128 -DGLM5_MLA_PV_N128;
#        tools/probe/build.sh build-lead mla_wgmma_probe_rs -DGLM5_MLA_WG0_PV_RS;
#        tools/probe/build.sh build-lead mla_wgmma_probe_both -DGLM5_MLA_PV_N128 -DGLM5_MLA_WG0_PV_RS;
#        tools/device_pack.sh build-lead glm5prof kernels_gpu_wgmma kernels_gpu_mla_decode mla_wgmma_probe
#        mla_wgmma_probe_n128 mla_wgmma_probe_rs mla_wgmma_probe_both; tools/flashmla_prepare.sh /work/.mirror/deepseek-ai+FlashMLA/repo
#        /work/.mirror/NVIDIA+cutlass/repo; run `bash THIS` with carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s30c
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
device_round_test kernels_gpu_wgmma 60
grep -E "^wgmma m64n128" $W/kernels_gpu_wgmma.log | head -8
device_round_test kernels_gpu_mla_decode 200 --gtest_filter='Shapes/*:GpuMlaDecodeKernelChoice*'
for r in 1 2; do
  for v in "" _n128 _rs _both; do
    GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe$v > $W/probe$v-$r.txt 2>&1; echo "probe$v round $r rc=$?"
  done
done
for r in 1 2; do for v in "" _n128 _rs _both; do echo "== probe$v round $r (fp16 operands; '' = the library's m64n64 P . V)"
  grep -E 'B=|check' $W/probe$v-$r.txt | head -8; done; done
if [[ ${S30_TESTS_ONLY:-0} == 1 ]]; then device_round_pack; exit 0; fi
device_round_bench_mla 170
OUT=$W/flashmla FLASHMLA_BUDGET_S=200 FLASHMLA_BENCH_S=70 FLASHMLA_BENCH_ARGS="--batches 1,64,128 --reps 20" \
  timeout 210 bash tools/device_flashmla.sh > $W/flashmla_run.txt 2>&1; echo "flashmla rc=$?"
grep -vE "^device_flashmla: (source|nvcc)" $W/flashmla/flashmla.txt 2>/dev/null | tail -16 || tail -5 $W/flashmla_run.txt
device_round_pack
