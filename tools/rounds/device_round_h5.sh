#!/usr/bin/env bash
# Device call H5 (2026-11-29, session 3): the final main's GPU tests of the last changes (FP8 m-tile default,
# MLA absorption dispatch, engine) and the decode-step benchmark at batch 1 / 8 / 32 (FP8, graphs).
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/h5; mkdir -p $W
run() { timeout "$2" $BIN/$1 > $W/$1.log 2>&1; echo "$1 rc=$? $(grep -c '^\[       OK' $W/$1.log) ok $(grep -c '^\[  FAILED' $W/$1.log) failed"; }
run kernels_gpu_linear_fp8 150 & P1=$!; run kernels_gpu_mla_absorb 100 & P2=$!; run engine_gpu_golden 100 & P3=$!
wait $P1 $P2 $P3
run engine_gpu_fp8_weights 100 & P1=$!; run engine_gpu_graph 150 & P2=$!; wait $P1 $P2
grep -h -B2 -A8 "Failure" $W/*.log | head -30
BATCHES="1 8 32" WEIGHTS=fp8 GRAPHS=1 timeout 200 tools/decode_step_bench.sh $BIN/glm5prof /tmp/h5 > $W/step.txt 2>&1; echo "step rc=$?"
cp /tmp/h5/decode-step.json $W/
python3 -c "
import json
for r in json.load(open('$W/decode-step.json')):
  if 'skipped' in r: continue
  print(r['weights_dtype'], 'b%d'%r['batch'], r['kv_path'], 'graph', int(r['graph']), '%.2f ms'%(r['step_us']/1e3), 'floor %.2f'%(r['floor_us']/1e3), 'ratio %.2f'%r['ratio'], 'traced +%.1f%%'%r['overhead_pct'])"
(cd $OUT && tar czf h5.tar.gz h5 && rm -rf h5)
