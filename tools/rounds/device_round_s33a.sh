#!/usr/bin/env bash
# Session 33, call S33a: the MLA crossover with its consumers' remote arrivals at CTA-scope release (mbar_arrive_cluster;
# S32a on an H100 saw the .release.cluster form 28% slower than no crossover: 291 against 228 us at B 128 x 128 heads).
# 1. the MLA GPU tests (crossover bitwise as without it, both operand forms); 2. the phase probe, fp16 operands, twice:
# the library form without crossover (''), with crossover (xo), and with crossover at .release.cluster (xorc, the S32a
# form); 3. `glm5prof bench kernels --only mla --quick` (rows _xo) and FlashMLA's sparse FP8 decode from its public source.
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
# Device time was short (session 33): the bench's quick sweep (batch 1 and 64) and FlashMLA at batch 64 / 128.
timeout 120 $BIN/glm5prof bench kernels --only mla --quick --reps 20 --out $W/mla.json > $W/mla.txt 2>&1
echo "mla bench rc=$?"; grep -E "fp8_wgmma|copy_d2d|gemm_bf16" $W/mla.txt | head -30
OUT=$W/flashmla FLASHMLA_BUDGET_S=190 FLASHMLA_BENCH_S=60 FLASHMLA_BENCH_ARGS="--batches 64,128 --reps 20" \
  timeout 200 bash tools/device_flashmla.sh > $W/flashmla_run.txt 2>&1; echo "flashmla rc=$?"
grep -vE "^device_flashmla: (source|nvcc)" $W/flashmla/flashmla.txt 2>/dev/null | tail -16 || tail -5 $W/flashmla_run.txt
device_round_pack
