#!/usr/bin/env bash
# Device call S5b (2026-11-29, session 5; the session's last ~4 minutes of device time): FlashMLA's sparse
# FP8 decode built from its public source and timed (tools/device_flashmla.sh, batch 1 / 64 / 128, heads
# 64 / 128, s_q 1 / 2), then ours in the same run (`glm5prof bench kernels --only mla --quick`: B 1 / 64 at
# 64 / 16 heads, and B 64 / 128 at 128 and 2 x 128 heads), then the TMA GEMV test after its split fix.
set -u
W=$OUT/s5b; mkdir -p $W/flashmla
OUT=$W/flashmla FLASHMLA_BUDGET_S=165 FLASHMLA_BENCH_S=60 FLASHMLA_BENCH_ARGS="--batches 1,64,128 --reps 20" \
  timeout 170 bash tools/device_flashmla.sh > $W/flashmla/run.txt 2>&1; echo "flashmla rc=$?"
tail -45 $W/flashmla/flashmla.txt 2>/dev/null || tail -20 $W/flashmla/run.txt
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin
timeout 45 $BIN/glm5prof bench kernels --only mla --quick --reps 20 --out $W/mla.json > $W/mla.txt 2>&1; echo "mla rc=$?"
grep -E "mla_decode_fp8|copy|gemm" $W/mla.txt | head -30
timeout 15 $BIN/kernels_gpu_linear_fp8 --gtest_filter='GpuLinearFp8Tma.*' > $W/tma_test.log 2>&1; echo "tma test rc=$?"
grep -E "tma gemv|Failure|FAILED|OK \]|what" $W/tma_test.log | head
(cd $OUT && tar czf s5b.tar.gz s5b && rm -rf s5b)
