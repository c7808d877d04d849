#!/usr/bin/env bash
# Device call S7a (2026-11-30, session 7): first run of two compiled-only changes of session 6 -- the non-aligned
# barrier.sync / barrier.arrive in kernels/wgmma.cuh (synccheck on the partial-second-head-block shape must report
# 0 errors; S6m found 480 at the epilogue barrier) and the single-pass epilogue address (spill 164 -> 16 B; the quick
# bench must not regress) -- plus racecheck on a split-K shape, gpu_mla_decode twice.
#   tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode; run with carry [".device"]
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/s7a; mkdir -p $W
timeout 90 $BIN/kernels_gpu_mla_decode --gtest_repeat=2 > $W/mla_test.log 2>&1; echo "mla test x2 rc=$?"
grep -E "Failure|FAILED|PASSED" $W/mla_test.log | head; echo "wgmma checks: $(grep -c 'wgmma kernel:' $W/mla_test.log)"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ]; then
  timeout 60 $CS --tool synccheck $BIN/kernels_gpu_mla_decode --gtest_filter='Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/30' > $W/synccheck.log 2>&1
  echo "synccheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $W/synccheck.log | head -3
  timeout 150 $CS --tool racecheck $BIN/kernels_gpu_mla_decode --gtest_filter='Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/15' > $W/racecheck.log 2>&1
  echo "racecheck (B 8, 64 heads, split-K) rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $W/racecheck.log | head -3
else echo "no compute-sanitizer"; fi
timeout 60 $BIN/glm5prof bench kernels --only mla --quick --reps 20 --out $W/mla.json > $W/mla.txt 2>&1; echo "mla bench rc=$?"
grep -E "^  mla_decode_(fp8|bf16)_wgmma" $W/mla.txt | head -12
(cd $OUT && tar czf s7a.tar.gz s7a && rm -rf s7a)
