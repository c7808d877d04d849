#!/usr/bin/env bash
# Device call S6h (2026-11-30, session 6): the wgmma MLA kernel with the integer e4m3 decode (dequant4_bf16_int; gpu_dequant checks it bitwise) in the two-warpgroup register producer (two quarters
# of rows in flight, L2 prefetch two tiles ahead, Q staged by the consumers while the producer gathers):
# correctness (gpu_mla_decode), phase timing (tools/probe/mla_wgmma_probe), `bench kernels --only mla --quick`.
#   tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode mla_wgmma_probe; run with carry [".device"]
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/s6h; mkdir -p $W
timeout 30 $BIN/kernels_gpu_dequant 2>&1 | tail -4; timeout 60 $BIN/mla_wgmma_probe > $W/probe.txt 2>&1; echo "probe rc=$?"; cat $W/probe.txt
timeout 240 $BIN/kernels_gpu_mla_decode > $W/mla_test.log 2>&1; echo "mla test rc=$?"
grep -E "Failure|FAILED|what|Expected|Which is|differ|PASSED" $W/mla_test.log | head -30
grep -c "wgmma kernel:" $W/mla_test.log
timeout 90 $BIN/glm5prof bench kernels --only mla --quick --reps 20 --out $W/mla.json > $W/mla.txt 2>&1; echo "mla bench rc=$?"
grep -E "mla_decode|copy|gemm|error" $W/mla.txt | grep -v "B=1 " | head -40
(cd $OUT && tar czf s6h.tar.gz s6h && rm -rf s6h)
