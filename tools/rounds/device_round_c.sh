#!/usr/bin/env bash
# Device call C (2026-11-29 session 2): fuzzers in the background (CPU); correctness re-runs after the
# round-2 fixes (MLA decode, FP8 GEMV/MoE, grouped MoE, FP8-weight engine, graph replay, CUPTI
# fallback); then the diagnosis runs (tiny GPU trace for HTA, torch.profiler traces, DeepSeek-V3.2 TP8
# rank 0). One file back: $OUT/c.tar.gz.
set -u
T0=$(date +%s); el() { echo "[+$(( $(date +%s) - T0 ))s]"; }
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
W=/tmp/c; mkdir -p $W; BIN=.device/bin
( tools/device_fuzz.sh "$PWD/.device/fuzz" "$W/fuzz" 70 11 > "$W/fuzz.log" 2>&1; echo "fuzz rc=$?" >> "$W/fuzz.log" ) &
FZ=$!
run() { timeout "$2" $BIN/$1 > $W/$1.log 2>&1; echo "$1 rc=$? $(grep -c '^\[       OK' $W/$1.log) ok $(grep -c '^\[  FAILED' $W/$1.log) failed $(el)"; }
run kernels_gpu_mla_decode 150 & P1=$!
run kernels_gpu_linear_fp8 150 & P2=$!
run engine_gpu_fp8_weights 100 & P3=$!
wait $P1 $P2 $P3
run kernels_gpu_moe 120 & P1=$!
run kernels_gpu_moe_grouped 200 & P2=$!
GLM5_BINARY_DIR=$PWD/$BIN run cli_gpu_robustness 90 & P3=$!
run engine_gpu_graph 200 & P4=$!
wait $P1 $P2 $P3 $P4
grep -h "FAILED\|Failure" -A4 $W/*_gpu_*.log | head -60
grep -h "moe grouped\|fp8 weights, \|block-scaled\|captured graph\|records attributed\|differ" $W/*.log | head -40
echo "=== tiny GPU trace $(el)"
timeout 120 $BIN/glm5prof profile --backend cuda --model glm5-tiny --steps 3 --warmup 1 --kv-path all --out $W/tiny > $W/tiny.log 2>&1; echo "tiny rc=$?"
echo "=== torch traces $(el)"
timeout 150 python3 tools/record_torch_trace.py $W/torch --glm5prof $BIN/glm5prof 2>&1 | tail -15
echo "=== deepseek_v32 $(el)"
BATCHES=1 timeout 200 tools/device_v32.sh $BIN $W/v32 2>&1 | tail -15
rm -f $W/v32/*/trace.json
wait $FZ; echo "=== fuzz $(el)"; tail -10 $W/fuzz.log
tar czf $OUT/c.tar.gz -C /tmp c; echo "done $(el)"
