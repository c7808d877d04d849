#!/usr/bin/env bash
# Device call S7c (2026-11-30, session 7): the FP8 bulk feed with conflict-free raw slots and full_lo (WG0 starts
# Q . K^T on panels 0..2 after round 1). gpu_mla_decode twice, synccheck + racecheck, the quick MLA bench, the
# phase probe (finer producer slots), and the named-barrier racecheck probe with the kernel's barrier skeleton
# (modes 3/4).
#   tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode mla_wgmma_probe probe_p0 named_barrier_racecheck
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/s7c; mkdir -p $W
timeout 120 $BIN/kernels_gpu_mla_decode --gtest_repeat=2 > $W/mla_test.log 2>&1; echo "mla test x2 rc=$?"
grep -E "Failure|FAILED|PASSED" $W/mla_test.log | head; echo "wgmma checks: $(grep -c 'wgmma kernel:' $W/mla_test.log)"
grep -B2 -A8 -m2 "Failure" $W/mla_test.log | head -40
timeout 60 $BIN/glm5prof bench kernels --only mla --quick --reps 20 --out $W/mla.json > $W/mla.txt 2>&1; echo "mla bench rc=$?"
grep -E "^  mla_decode_(fp8|bf16)_wgmma" $W/mla.txt | head -12
for pb in mla_wgmma_probe probe_p0; do echo "== $pb"; timeout 60 $BIN/$pb > $W/$pb.txt 2>&1; echo "probe rc=$?"; grep -A4 -E "^B=(64 H=64|128 H=128)" $W/$pb.txt; done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ]; then
  for m in 0 1 2 3 4; do timeout 30 $CS --tool racecheck $BIN/named_barrier_racecheck $m 2>&1 | grep -E "mode|RACECHECK SUMMARY|ERROR SUMMARY"; done
  timeout 60 $CS --tool synccheck $BIN/kernels_gpu_mla_decode --gtest_filter='Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/30' > $W/synccheck.log 2>&1
  echo "synccheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $W/synccheck.log | head -3
  timeout 150 $CS --tool racecheck $BIN/kernels_gpu_mla_decode --gtest_filter='Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/15' > $W/racecheck.log 2>&1
  echo "racecheck (B 8, 64 heads, split-K) rc=$?"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" $W/racecheck.log | head -3
  grep -oE "Race reported between (Read|Write) access at [^ ]+ in mla_decode_wgmma.cu:[0-9]+" $W/racecheck.log | sed 's/.*cu://' | sort | uniq -c | head
  grep -oE "and (Read|Write) access at .* in mla_decode_wgmma.cu:[0-9]+" $W/racecheck.log | sed 's/.*cu://' | sort | uniq -c | head
else echo "no compute-sanitizer"; fi
(cd $OUT && tar czf s7c.tar.gz s7c && rm -rf s7c)
