#!/usr/bin/env bash
# Session 32, call S32b (after S32a, same pack): `glm5prof bench kernels --only mla --reps 20` (with the crossover rows,
# mla_decode_fp8_wgmma_f16_xo, at 128 and 256 heads) and FlashMLA's sparse FP8 decode from its public source beside it.
# Usage: as device_round_s32a.sh; run `bash THIS` with carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s32b
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
device_round_bench_mla 200
OUT=$W/flashmla FLASHMLA_BUDGET_S=220 FLASHMLA_BENCH_S=70 FLASHMLA_BENCH_ARGS="--batches 1,64,128 --reps 20" \
  timeout 230 bash tools/device_flashmla.sh > $W/flashmla_run.txt 2>&1; echo "flashmla rc=$?"
grep -vE "^device_flashmla: (source|nvcc)" $W/flashmla/flashmla.txt 2>/dev/null | tail -16 || tail -5 $W/flashmla_run.txt
device_round_pack
