#!/usr/bin/env bash
# Device call S7d (2026-11-30, session 7): the FP8 bulk feed without its L2 prefetch (S7c: faster), and the
# integer e4m3 decode as a probe variant (probe_int, GLM5_MLA_WG_INTDECODE=1): S7c's phase probe put the
# producers' dequantization (~4k cycles per tile) on the critical path. gpu_dequant (integer decode bitwise
# = the hardware conversion), gpu_mla_decode, the quick MLA bench, both probes.
#   tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode kernels_gpu_dequant mla_wgmma_probe probe_int
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/s7d; mkdir -p $W
timeout 60 $BIN/kernels_gpu_dequant > $W/dequant.log 2>&1; echo "dequant rc=$?"; grep -E "mismatches|PASSED|FAILED" $W/dequant.log
timeout 90 $BIN/kernels_gpu_mla_decode > $W/mla_test.log 2>&1; echo "mla test rc=$?"
grep -E "Failure|FAILED|PASSED" $W/mla_test.log | head; echo "wgmma checks: $(grep -c 'wgmma kernel:' $W/mla_test.log)"
timeout 60 $BIN/glm5prof bench kernels --only mla --quick --reps 20 --out $W/mla.json > $W/mla.txt 2>&1; echo "mla bench rc=$?"
grep -E "^  mla_decode_fp8_wgmma" $W/mla.txt | head -8
for pb in mla_wgmma_probe probe_int; do echo "== $pb"; timeout 60 $BIN/$pb > $W/$pb.txt 2>&1; echo "probe rc=$?"; grep -A4 -E "^B=(64 H=64|128 H=128)" $W/$pb.txt; done
(cd $OUT && tar czf s7d.tar.gz s7d && rm -rf s7d)
