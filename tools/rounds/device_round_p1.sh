#!/usr/bin/env bash
# Device calls P1a / P1b (2026-11-29, session 4): programmatic dependent launch (kernels/launch.cuh),
# the GEMV MLA absorption kernels and the batch-1 projection groups.
#   a: all GPU tests (every kernel now waits in griddepcontrol.wait), `bench kernels --only absorb`,
#      and the graph-trace helper's request (.device/req/graphtrace.sh: profile --graph-trace graph|node).
#   b: the batch-1 decode step with PDL (.device/bin/glm5prof) against the same commit built with
#      -DGLM5_PDL=OFF (.device/bin/glm5prof_nopdl), FP8 weights, graph on and off.
set -u
mode=${1:?usage: device_round_p1.sh a|b}
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/p1$mode; mkdir -p $W
if [[ $mode == a ]]; then
  mkdir -p /tmp/ptests
  timeout 300 tools/device_tests.sh $BIN /tmp/ptests 6 290 > $W/tests.txt 2>&1
  echo "tests rc=$?"; sed -n '/==== failures/,$p' $W/tests.txt | head -60
  cp -r /tmp/ptests $W/tests
  $BIN/glm5prof bench kernels --only absorb --reps 15 --out $W/absorb.json > $W/absorb.txt 2>&1; echo "absorb rc=$?"
  grep -E "mla_(un)?absorb" $W/absorb.txt | head -40
  BIN=$BIN OUT=$W/gt timeout 200 bash .device/req/graphtrace.sh > $W/graphtrace.txt 2>&1; echo "graphtrace rc=$?"
else
  for t in kernels_gpu_linear_fp8_splitk kernels_gpu_mla_absorb kernels_gpu_linear_fp8; do
    timeout 100 $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$? $(grep -c '^\[       OK' $W/$t.log) ok $(grep -c '^\[  FAILED' $W/$t.log) failed"
  done
  grep -h -B2 -A8 "Failure" $W/*.log | head -30
  for v in pdl nopdl; do
    b=$BIN/glm5prof; [[ $v == nopdl ]] && b=$BIN/glm5prof_nopdl
    BATCHES=1 WEIGHTS=fp8 GRAPHS="1 0" timeout 140 tools/decode_step_bench.sh $b /tmp/step-$v > $W/step-$v.txt 2>&1; echo "step $v rc=$?"
    cp /tmp/step-$v/decode-step.json $W/step-$v.json
    for g in 0 1; do cp /tmp/step-$v/runs/b1-c32768-wfp8-graph$g/report.md $W/report-$v-graph$g.md 2>/dev/null; done
    for g in 0 1; do cp /tmp/step-$v/runs/b1-c32768-wfp8-graph$g/report.json $W/report-$v-graph$g.json 2>/dev/null; done
    python3 -c "
import json
for r in json.load(open('$W/step-$v.json')):
  if 'skipped' in r: continue
  print('$v', r['weights_dtype'], 'b%d'%r['batch'], r['kv_path'], 'graph', int(r['graph']), '%.2f ms'%(r['step_us']/1e3), 'floor %.2f'%(r['floor_us']/1e3), 'ratio %.2f'%r['ratio'], 'traced %+.1f%%'%r['overhead_pct'])"
  done
  BATCHES="8 32" WEIGHTS=fp8 GRAPHS=1 timeout 150 tools/decode_step_bench.sh $BIN/glm5prof /tmp/step-b832 > $W/step-b832.txt 2>&1; echo "step b8/b32 rc=$?"
  cp /tmp/step-b832/decode-step.json $W/step-b832.json
  python3 -c "
import json
for r in json.load(open('$W/step-b832.json')):
  if 'skipped' in r: continue
  print('pdl', r['weights_dtype'], 'b%d'%r['batch'], r['kv_path'], 'graph', int(r['graph']), '%.2f ms'%(r['step_us']/1e3), 'floor %.2f'%(r['floor_us']/1e3), 'ratio %.2f'%r['ratio'], 'traced %+.1f%%'%r['overhead_pct'])"
fi
(cd $OUT && tar czf p1$mode.tar.gz p1$mode && rm -rf p1$mode)
