#!/usr/bin/env bash
# Device call S6b (2026-11-30, session 6): the sm_90a wgmma MLA decode kernel (kernels/sm90a/) for the first
# time: its correctness inside gpu_mla_decode (every shape, FP8 and BF16 rows, single-pass and split-K), then
# `glm5prof bench kernels --only mla --quick` (default kernel and the wgmma kernel side by side).
#   tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode; run with carry [".device"]
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/s6b; mkdir -p $W
timeout 240 $BIN/kernels_gpu_mla_decode > $W/mla_test.log 2>&1; echo "mla test rc=$?"
grep -E "wgmma|Failure|FAILED|OK \]|what|Expected|Which is|differ" $W/mla_test.log | head -60
timeout 90 $BIN/glm5prof bench kernels --only mla --quick --reps 20 --out $W/mla.json > $W/mla.txt 2>&1; echo "mla bench rc=$?"
grep -E "mla_decode|copy|gemm|error" $W/mla.txt | head -40
(cd $OUT && tar czf s6b.tar.gz s6b && rm -rf s6b)
