#!/usr/bin/env bash
# Device call G (2026-11-29, session 3): the absorb request, then the GPU tests of the MLA split /
# 16-head-slice options, the MoE pair-down path, the fused attention prologue and the engine, then
# `bench kernels --only mla` (split / heads-per-CTA sweeps) and one batch-1 FP8 profile (per-op table).
set -u
T0=$(date +%s); el() { echo "[+$(( $(date +%s) - T0 ))s]"; }
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared" BIN=$PWD/.device/bin
W=$OUT/g; mkdir -p $W/absorb
OUT=$W/absorb timeout 200 bash .device/req/gpu-request-absorb.sh > $W/absorb/stdout.txt 2>&1; echo "absorb rc=$? $(el)"
tail -30 $W/absorb/stdout.txt
run() { timeout "$2" $BIN/$1 > $W/$1.log 2>&1; echo "$1 rc=$? $(grep -c '^\[       OK' $W/$1.log) ok $(grep -c '^\[  FAILED' $W/$1.log) failed $(el)"; }
run kernels_gpu_mla_decode 200 & P1=$!; run kernels_gpu_moe_grouped 120 & P2=$!; run kernels_gpu_attn_prologue 60 & P3=$!
run kernels_gpu_norm 60 & P4=$!; run kernels_gpu_kv_cache 60 & P5=$!; run kernels_gpu_rope 60 & P6=$!
wait $P1 $P2 $P3 $P4 $P5 $P6
run engine_gpu_golden 120 & P1=$!; run engine_gpu_fp8_weights 120 & P2=$!; run engine_gpu_graph 170 & P3=$!
wait $P1 $P2 $P3
grep -h "FAILED\|Failure" -A6 $W/*.log | head -60
grep -h "pair-down\|attn_prologue\|16h/CTA" $W/*.log | head -20
timeout 150 $BIN/glm5prof bench kernels --only mla --out $W/mla-bench.json > $W/mla-bench.txt 2>&1; echo "bench mla rc=$? $(el)"
grep -E "mla_decode|ceilings" $W/mla-bench.txt | tail -60
timeout 120 $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch 1 --context 32768 --pool-tokens 495000 \
  --weights-dtype fp8 --steps 4 --warmup 2 --untraced-steps 3 --out $W/b1 > $W/b1.log 2>&1; echo "profile b1 rc=$? $(el)"
grep -A45 "^| op |" $W/b1/report.md | head -50; grep -A16 "^| kernel |" $W/b1/report.md | head -18
cp $W/b1/report.md $W/b1.report.md 2>/dev/null; cp $W/b1/report.json $W/b1.report.json 2>/dev/null; rm -rf $W/b1
(cd $OUT && tar czf g.tar.gz g && rm -rf g); echo "done $(el)"
