#!/usr/bin/env bash
# Session 29, call S29a (H200): issue 3 on the final build, side by side in one call.
#  1. GPU tests touched by session 29: the MLA twin (round_f16 moved to common/dtype.h) and the MoE wgmma path (its
#     plan computed once per call: moe_fp8_wgmma_checked_plan);
#  2. the MLA phase probe with the producers' wait split (S29: [26] codes landed, [22] then the buffer), both forms;
#  3. `glm5prof bench kernels --only mla --reps 20` (the fp16-operand form is Auto's default since S28) and
#     `--only cast`;
#  4. FlashMLA's sparse FP8 decode built from its public source beside it (tools/device_flashmla.sh).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode kernels_gpu_moe_grouped mla_wgmma_probe;
#        tools/flashmla_prepare.sh /work/.mirror/deepseek-ai+FlashMLA/repo /work/.mirror/NVIDIA+cutlass/repo;
#        run `bash THIS` with carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s29a
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
device_round_test kernels_gpu_mla_decode 150 --gtest_filter='Shapes/*:GpuMlaDecodeKernelChoice*'
device_round_test kernels_gpu_moe_grouped 90 \
  --gtest_filter='GpuMoeGrouped.Bf16WgmmaMatchesCpuTwin:GpuMoeGrouped.MatchesPerTokenAndCpu'
timeout 30 $BIN/mla_wgmma_probe > $W/probe_bf16.txt 2>&1; echo "probe bf16 rc=$?"
GLM5_PROBE_F16=1 timeout 30 $BIN/mla_wgmma_probe > $W/probe_f16.txt 2>&1; echo "probe f16 rc=$?"
for f in bf16 f16; do echo "== probe, $f operands"; grep -E 'B=|producer|WG0|WG1' $W/probe_$f.txt | head -24; done
device_round_bench_mla 150
timeout 60 $BIN/glm5prof bench kernels --only cast --reps 20 --out $W/cast.json > $W/cast.txt 2>&1; echo "cast bench rc=$?"
python3 -c "
import json
for r in json.load(open('$W/cast.json')):
    print(r['kernel'], 'B', r.get('batch'), '%.1f us' % r['median_us'], '%.0f GB/s' % r.get('achieved_gbps', 0), '%.1f%%' % (100*r.get('roofline_fraction', 0)))
" 2>&1 | head -12
OUT=$W/flashmla FLASHMLA_BUDGET_S=200 FLASHMLA_BENCH_S=70 FLASHMLA_BENCH_ARGS="--batches 1,64,128 --reps 20" \
  timeout 210 bash tools/device_flashmla.sh > $W/flashmla_run.txt 2>&1; echo "flashmla rc=$?"
grep -vE "^device_flashmla: (source|nvcc)" $W/flashmla/flashmla.txt 2>/dev/null | tail -16 || tail -5 $W/flashmla_run.txt
device_round_pack
