#!/usr/bin/env bash
# One device call recording issue 3's numbers: gpu_mla_decode, the wgmma MLA phase probe, FlashMLA built from
# source on the device (tools/device_flashmla.sh; never committed) and `glm5prof bench kernels --only mla` in the
# same run, and the decode step at batch 32 (FP8 weights, graphs). Calls made with it: S6k (session 6's final
# kernel), S7e (session 7's bulk-copy FP8 feed), S7f (S7e plus six Q loads in flight; not kept), S7i (bulk feed v2: rope by TMA),
# S8h (WG1 issues the code copies), S8j (+ cluster merge for S = 2..8), S8n (session 8's final kernel). Results:
# reports/2026-11-30-h200-kv-kernels.md / .json, -decode-step.md / .json, -mla-wgmma-probe.md.
#   tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode mla_wgmma_probe; run `bash THIS TAG` with carry [".device"]
set -u
TAG=${1:-record}
W=$OUT/$TAG; mkdir -p $W/flashmla
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin
timeout 120 $BIN/kernels_gpu_mla_decode > $W/mla_test.log 2>&1; echo "mla test rc=$?"
grep -E "Failure|FAILED|PASSED" $W/mla_test.log | head; echo "wgmma checks: $(grep -c 'wgmma kernel:' $W/mla_test.log)"
timeout 60 $BIN/mla_wgmma_probe > $W/probe.txt 2>&1; echo "probe rc=$?"; grep -A5 -E "^B=(64 H=64|128 H=64|128 H=128)" $W/probe.txt | grep -v "^--"
OUT=$W/flashmla FLASHMLA_BUDGET_S=165 FLASHMLA_BENCH_S=60 FLASHMLA_BENCH_ARGS="--batches 1,64,128 --reps 20" \
  timeout 170 bash tools/device_flashmla.sh > $W/flashmla/run.txt 2>&1; echo "flashmla rc=$?"
grep -E "^ +shared|^per_query" $W/flashmla/flashmla.txt 2>/dev/null | head -20 || tail -5 $W/flashmla/run.txt
timeout 170 $BIN/glm5prof bench kernels --only mla --reps 20 --out $W/mla.json > $W/mla.txt 2>&1; echo "mla bench rc=$?"
grep -E "^  (mla_decode_fp8_wgmma|mla_decode_bf16_wgmma|copy|gemm)" $W/mla.txt | head -40
BATCHES="32" WEIGHTS=fp8 GRAPHS=1 timeout 150 tools/decode_step_bench.sh $BIN/glm5prof $W/step > $W/step.txt 2>&1; echo "step rc=$?"
python3 tools/decode_step_summary.py $W/step/decode-step.json 2>&1 | tail -6
rm -rf $W/step/runs/*/trace.json
if [ -x $BIN/kernels_gpu_linear_fp8 ]; then  # S7i: the TMA GEMV after its tensor-map helpers moved to kernels/tma.h
  timeout 60 $BIN/kernels_gpu_linear_fp8 --gtest_filter='GpuLinearFp8Tma.*' > $W/linear_tma.log 2>&1; echo "linear fp8 tma rc=$?"
  grep -E "PASSED|FAILED" $W/linear_tma.log | head -3
fi
(cd $OUT && tar czf $TAG.tar.gz $TAG && rm -rf $TAG)
