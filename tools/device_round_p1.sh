#!/usr/bin/env bash
# Device call P1 (2026-11-29, session 4): programmatic dependent launch (kernels/launch.cuh) and the
# GEMV MLA absorption kernels. All GPU tests (every kernel now waits in griddepcontrol.wait), the
# absorb benchmark, and the batch-1 decode step with PDL (.device/bin/glm5prof) against the same commit
# built with -DGLM5_PDL=OFF (.device/bin/glm5prof_nopdl), FP8 weights, graph on and off.
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/p1; mkdir -p $W
# GPU tests, 4 at a time, in the background while the timed runs below wait for them.
mkdir -p /tmp/ptests; mv $BIN/glm5prof_nopdl /tmp/ 2>/dev/null
timeout 280 tools/device_tests.sh $BIN /tmp/ptests 4 270 > $W/tests.txt 2>&1
echo "tests rc=$?"; tail -30 $W/tests.txt
$BIN/glm5prof bench kernels --only absorb --reps 15 --out $W/absorb.json > $W/absorb.txt 2>&1; echo "absorb rc=$?"
grep -E "mla_(un)?absorb" $W/absorb.txt | head -30
for v in pdl nopdl; do
  b=$BIN/glm5prof; [[ $v == nopdl ]] && b=/tmp/glm5prof_nopdl
  BATCHES=1 WEIGHTS=fp8 GRAPHS="1 0" timeout 120 tools/decode_step_bench.sh $b /tmp/step-$v > $W/step-$v.txt 2>&1; echo "step $v rc=$?"
  cp /tmp/step-$v/decode-step.json $W/step-$v.json
  cp /tmp/step-$v/runs/b1-c32768-wfp8-graph1/report.md $W/report-$v-graph1.md 2>/dev/null
  python3 -c "
import json
for r in json.load(open('$W/step-$v.json')):
  if 'skipped' in r: continue
  print('$v', r['weights_dtype'], 'b%d'%r['batch'], r['kv_path'], 'graph', int(r['graph']), '%.2f ms'%(r['step_us']/1e3), 'floor %.2f'%(r['floor_us']/1e3), 'ratio %.2f'%r['ratio'], 'traced %+.1f%%'%r['overhead_pct'])"
done
cp -r /tmp/ptests $W/tests
(cd $OUT && tar czf p1.tar.gz p1 && rm -rf p1)
