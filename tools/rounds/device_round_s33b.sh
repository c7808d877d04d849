#!/usr/bin/env bash
# Session 33, call S33b (right after S33a, same pack): `glm5prof bench kernels --only mla --quick` (rows _xo at 128 /
# 256 heads) and FlashMLA's sparse FP8 decode from its public source at batch 64 / 128 (device time was short).
# Usage: as device_round_s33a.sh; run `bash THIS` with carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s33b
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
# Device time was short (session 33): the bench's quick sweep (batch 1 and 64) and FlashMLA at batch 64 / 128.
timeout 120 $BIN/glm5prof bench kernels --only mla --quick --reps 20 --out $W/mla.json > $W/mla.txt 2>&1
echo "mla bench rc=$?"; grep -E "fp8_wgmma|copy_d2d|gemm_bf16" $W/mla.txt | head -30
OUT=$W/flashmla FLASHMLA_BUDGET_S=190 FLASHMLA_BENCH_S=60 FLASHMLA_BENCH_ARGS="--batches 64,128 --reps 20" \
  timeout 200 bash tools/device_flashmla.sh > $W/flashmla_run.txt 2>&1; echo "flashmla rc=$?"
grep -vE "^device_flashmla: (source|nvcc)" $W/flashmla/flashmla.txt 2>/dev/null | tail -16 || tail -5 $W/flashmla_run.txt
device_round_pack
