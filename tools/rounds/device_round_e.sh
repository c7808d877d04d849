#!/usr/bin/env bash
# Device call E (2026-11-29 session 2): re-check after the rmsnorm / FP8 MoE-down changes, then the
# decode-step benchmark at batch 1, 8 and 128 (BF16 and FP8 weights, graph off and on).
set -u
T0=$(date +%s); el() { echo "[+$(( $(date +%s) - T0 ))s]"; }
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
W=$OUT/e; mkdir -p $W; BIN=.device/bin
run() { timeout "$2" $BIN/$1 > $W/$1.log 2>&1; echo "$1 rc=$? $(grep -c '^\[       OK' $W/$1.log) ok $(grep -c '^\[  FAILED' $W/$1.log) failed $(el)"; }
run kernels_gpu_norm 60 & P1=$!; run kernels_gpu_moe 120 & P2=$!; run engine_gpu_golden 90 & P3=$!
wait $P1 $P2 $P3
run kernels_gpu_linear_fp8 120 & P1=$!; run engine_gpu_fp8_weights 90 & P2=$!; run engine_gpu_graph 150 & P3=$!
wait $P1 $P2 $P3
grep -h "FAILED\|Failure" -A4 $W/*.log | head -40
grep -h "differ bitwise\|fp8 moe" $W/*.log | head -8
BATCHES="1 8 128" WEIGHTS="fp8 bf16" timeout 380 tools/decode_step_bench.sh $BIN/glm5prof /tmp/e-bench > $W/bench.txt 2>&1; echo "bench rc=$? $(el)"
tail -32 $W/bench.txt
cp /tmp/e-bench/decode-step.json $W/ 2>/dev/null
for d in /tmp/e-bench/runs/b1-c32768-wfp8-graph1 /tmp/e-bench/runs/b1-c32768-wfp8-graph0; do head -c 25000 $d/report.md > $W/$(basename $d).report.md; done
tar czf $OUT/e.tar.gz -C $OUT e && rm -rf $W; echo "done $(el)"
