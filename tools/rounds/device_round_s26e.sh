#!/usr/bin/env bash
# Session 26, call S26e. S26d's kernels_gpu_moe_grouped ran out of its 240 s inside PairDownMatchesPerTokenBitwise
# (MatchesPerTokenAndCpu passed: the new bucket scan), so the wgmma twin test had not run on the final quantization.
# Here: that test alone, then Nsight Compute's own time of the bucket and quantization kernels at batch 1 / 8 / 32 /
# 128 (serialized, so without the PDL waits that the step's kernel durations include), against S26c's first form
# (x 9.4-9.7 / 15.0 / 21.3 / 34.4 us, act 10-11.6 / 16-19 / 17-20 / 19-22.5) and S26b's bucket kernel (~10 us).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_grouped; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s26e
device_round_test kernels_gpu_moe_grouped 150 --gtest_filter='*Wgmma*'
grep -E "^moe fp8 wgmma" $W/kernels_gpu_moe_grouped.log
timeout 150 ncu --kernel-name-base demangled --kernel-name regex:"moe_wgmma_quant|moe_group_kernel" \
  --metrics gpu__time_duration.sum --csv --print-units base \
  $BIN/glm5prof bench kernels --only moe --reps 1 --warmup 0 --out $W/ncu-moe.json > $W/ncu.csv 2> $W/ncu.err
echo "ncu rc=$?"; tail -1 $W/ncu.err
device_round_ncu_summary $W/ncu.csv
device_round_pack
