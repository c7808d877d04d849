#!/usr/bin/env bash
# Device call P7 (2026-11-29, session 4): the bulk-copy FP8 GEMV experiment (linear_fp8_bulk0..2 records of
# `bench kernels --only linear`, m = 1) against the dispatched GEMV (linear_fp8).
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/p7; mkdir -p $W
timeout 400 $BIN/glm5prof bench kernels --only linear --reps 15 --out $W/linear.json > $W/linear.txt 2>&1; echo "linear rc=$?"
grep -E "^  linear_fp8(_bulk[0-9])? +B=1 " $W/linear.txt | head -40; grep -i "error\|disagree" $W/linear.txt | head
(cd $OUT && tar czf p7.tar.gz p7 && rm -rf p7)
