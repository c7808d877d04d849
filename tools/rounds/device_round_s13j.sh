#!/usr/bin/env bash
# Session 13, call S13j: the final build's GPU tests and issue 3's record.
#  1. every GPU test executable, 4 at a time under 240 s each (tools/device_tests.sh; kernels_gpu_moe_grouped only its
#     PairDownMatchesPerTokenBitwise test, alone);
#  2. compute-sanitizer memcheck / racecheck on the batch-1 cases of gpu_mla_decode (the mma.sync kernel's new
#     prologue: load_q fast paths, issue_tile / dequant_tile lane mapping, the skipped stale tile);
#  3. `glm5prof bench kernels --only mla --reps 20` and FlashMLA built from source beside it (tools/device_flashmla.sh).
# Usage: tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13j
export GLM5_BINARY_DIR=$BIN
mkdir -p $W/alone && mv $BIN/kernels_gpu_moe_grouped $W/alone/
timeout 330 tools/device_tests.sh $BIN $W/tests 4 240 > $W/tests.txt 2>&1; echo "tests rc=$?"
sed -n '/==== failures ====/,/==== measured ====/p' $W/tests.txt | head -30
sed -n '/==== table ====/,$p' $W/tests.txt
timeout 90 $W/alone/kernels_gpu_moe_grouped --gtest_filter=GpuMoeGrouped.PairDownMatchesPerTokenBitwise > $W/moe_grouped.log 2>&1
echo "moe_grouped PairDown rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/moe_grouped.log | tr '\n' ' ')"
F='Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/3:Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/4'
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 $BIN/kernels_gpu_mla_decode \
    --gtest_filter="$F" > $W/san-$tool.log 2>&1
  echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)' $W/san-$tool.log | tr '\n' ' ')"
done
timeout 150 $BIN/glm5prof bench kernels --only mla --reps 20 --out $W/mla.json > $W/mla.txt 2>&1; echo "mla bench rc=$?"
python3 -c "
import json
for r in json.load(open('$W/mla.json')):
    if r['kernel']=='mla_decode_fp8_wgmma' or (r['kernel']=='mla_decode_fp8' and r['batch']==1):
        print(r['kernel'], 'B', r['batch'], 'H', r['heads'], 'S', r.get('splits'), '%.1f us' % r['median_us'], '%.1f%%' % (100*r['roofline_fraction']))
" | head -30
OUT=$W/flashmla FLASHMLA_BUDGET_S=165 FLASHMLA_BENCH_S=60 FLASHMLA_BENCH_ARGS="--batches 1,64,128 --reps 20" \
  timeout 170 bash tools/device_flashmla.sh > $W/flashmla_run.txt 2>&1; echo "flashmla rc=$?"
grep -E "^ +shared" $W/flashmla/flashmla.txt 2>/dev/null | head -12 || tail -5 $W/flashmla_run.txt
device_round_pack
