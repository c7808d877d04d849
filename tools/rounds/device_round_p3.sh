#!/usr/bin/env bash
# Device call P3 (2026-11-29, session 4): the final main's engine GPU tests and the decode-step sweep for
# reports/2026-11-29-h200-decode-step.{md,json}: batch 1 FP8 and BF16 weights, graph off and on; batch 8
# / 32 / 128 (128 at the largest context that fits) FP8 with graphs. All with PDL and --graph-trace graph.
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared" GLM5_BINARY_DIR=$PWD/.device/bin
BIN=$PWD/.device/bin; W=$OUT/p3; mkdir -p $W
for t in engine_gpu_graph engine_gpu_golden engine_gpu_fp8_weights cli_gpu_robustness; do
  timeout 150 $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$? $(grep -c '^\[       OK' $W/$t.log) ok $(grep -c '^\[  FAILED' $W/$t.log) failed"
done
grep -h -B2 -A8 "Failure" $W/*.log | head -30
BATCHES=1 WEIGHTS="fp8 bf16" GRAPHS="0 1" timeout 200 tools/decode_step_bench.sh $BIN/glm5prof /tmp/s1 > $W/step-b1.txt 2>&1; echo "b1 rc=$?"
BATCHES="8 32 128" WEIGHTS=fp8 GRAPHS=1 timeout 280 tools/decode_step_bench.sh $BIN/glm5prof /tmp/s2 > $W/step-b8-128.txt 2>&1; echo "b8-128 rc=$?"
for d in s1 s2; do
  cp /tmp/$d/decode-step.json $W/decode-step-$d.json
  for r in /tmp/$d/runs/*/; do n=$(basename $r); cp $r/report.md $W/$n.report.md 2>/dev/null; cp $r/report.json $W/$n.report.json 2>/dev/null; done
  python3 -c "
import json
for r in json.load(open('$W/decode-step-$d.json')):
  if 'skipped' in r: print('skipped', r.get('batch'), r.get('context'), r.get('skipped')); continue
  print(r['weights_dtype'], 'b%d'%r['batch'], 'c%d'%r['context'], r['kv_path'], 'graph', int(r['graph']), '%.2f ms'%(r['step_us']/1e3), 'floor %.2f'%(r['floor_us']/1e3), 'ratio %.2f'%r['ratio'], 'traced %+.1f%%'%r['overhead_pct'])"
done
(cd $OUT && tar czf p3.tar.gz p3 && rm -rf p3)
