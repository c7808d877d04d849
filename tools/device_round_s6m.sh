#!/usr/bin/env bash
# Device call S6m (2026-11-30, session 6): the wgmma MLA kernel after the review (/work/notes/review6.md):
# fence_operand before issue_pv's wgmma.fence, a WG0 barrier between its P stores and its own P . V, host checks.
# gpu_mla_decode twice (a repeat gives the bitwise fp8 / bf16-row comparison more chances to catch a race), the
# new partial-second-head-block shape under compute-sanitizer synccheck when the device has it, and the quick bench.
#   tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode; run with carry [".device"]
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/s6m; mkdir -p $W
timeout 90 $BIN/kernels_gpu_mla_decode --gtest_repeat=2 > $W/mla_test.log 2>&1; echo "mla test x2 rc=$?"
grep -E "Failure|FAILED|PASSED" $W/mla_test.log | head; echo "wgmma checks: $(grep -c 'wgmma kernel:' $W/mla_test.log)"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ]; then
  timeout 60 $CS --tool synccheck $BIN/kernels_gpu_mla_decode --gtest_filter='Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/30' > $W/synccheck.log 2>&1
  echo "synccheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $W/synccheck.log | head -3
else echo "no compute-sanitizer"; fi
timeout 60 $BIN/glm5prof bench kernels --only mla --quick --reps 20 --out $W/mla.json > $W/mla.txt 2>&1; echo "mla bench rc=$?"
grep -E "^  mla_decode_(fp8|bf16)_wgmma" $W/mla.txt | head -12
(cd $OUT && tar czf s6m.tar.gz s6m && rm -rf s6m)
