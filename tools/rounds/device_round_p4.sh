#!/usr/bin/env bash
# Device call P4 (2026-11-29, session 4): the row-contiguous FP8 GEMV experiment (linear_fp8_rows /
# _rows_u1 records of `bench kernels --only linear`, m = 1) against the dispatched GEMV (linear_fp8), and
# the refactored gpu_mla_absorb test.
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/p4; mkdir -p $W
timeout 100 $BIN/kernels_gpu_mla_absorb > $W/kernels_gpu_mla_absorb.log 2>&1
echo "kernels_gpu_mla_absorb rc=$? $(grep -c '^\[       OK' $W/kernels_gpu_mla_absorb.log) ok $(grep -c '^\[  FAILED' $W/kernels_gpu_mla_absorb.log) failed"
grep -h -B2 -A8 "Failure" $W/*.log | head -20
timeout 400 $BIN/glm5prof bench kernels --only linear --reps 15 --out $W/linear.json > $W/linear.txt 2>&1; echo "linear rc=$?"
grep -E "^  linear_fp8(_rows|_rows_u1)? +B=1 |^  linear_bf16 +B=1 " $W/linear.txt | head -40
(cd $OUT && tar czf p4.tar.gz p4 && rm -rf p4)
