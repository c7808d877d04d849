#!/usr/bin/env bash
# Session 12's final device call: every GPU test executable of the final build, 4 at a time under 240 s each
# (tools/device_tests.sh; kernels_gpu_moe_grouped only its PairDownMatchesPerTokenBitwise test: its first test alone
# needs its whole limit), then compute-sanitizer memcheck / synccheck / racecheck on GpuKvCast's correctness tests
# (the TMA bulk cast kernel).
#   tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; run `bash tools/rounds/device_round_s12f.sh` with carry [".device"]
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared" GLM5_BINARY_DIR=$PWD/.device/bin
BIN=$PWD/.device/bin; W=$OUT/s12f; mkdir -p $W/alone
mv $BIN/kernels_gpu_moe_grouped $W/alone/
timeout 300 tools/device_tests.sh $BIN $W/tests 4 240 > $W/tests.txt 2>&1; echo "tests rc=$?"
sed -n '/==== failures ====/,/==== measured ====/p' $W/tests.txt | head -30
sed -n '/==== table ====/,$p' $W/tests.txt
timeout 60 $W/alone/kernels_gpu_moe_grouped --gtest_filter=GpuMoeGrouped.PairDownMatchesPerTokenBitwise > $W/moe_grouped.log 2>&1
echo "moe_grouped PairDown rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/moe_grouped.log | tr '\n' ' ')"
for tool in memcheck synccheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 $BIN/kernels_gpu_kv_cast \
    --gtest_filter='GpuKvCast.CastMatchesCpu:GpuKvCast.GatherCastMatchesCpu:GpuKvCast.GatherCastAllInvalid:GpuKvCast.EmptyCastsWriteNothing' \
    > $W/san-$tool.log 2>&1
  echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' $W/san-$tool.log | tr '\n' ' ')"
done
(cd $OUT && tar czf s12f.tar.gz s12f && rm -rf s12f)
