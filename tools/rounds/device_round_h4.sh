set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/h4; mkdir -p $W
for t in engine_gpu_golden engine_gpu_fp8_weights engine_gpu_graph; do timeout 120 $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$? $(grep -c '^\[       OK' $W/$t.log) ok $(grep -c '^\[  FAILED' $W/$t.log) failed"; done
grep -h "rel\|max" $W/engine_gpu_fp8_weights.log | head -5
BATCHES=1 WEIGHTS=fp8 GRAPHS="0 1" timeout 150 tools/decode_step_bench.sh $BIN/glm5prof /tmp/h4 > $W/step.txt 2>&1; echo "step rc=$?"
cp /tmp/h4/decode-step.json $W/; for g in 0 1; do head -c 40000 /tmp/h4/runs/b1-c32768-wfp8-graph$g/report.md > $W/b1-graph$g.report.md; done
python3 -c "
import json
for r in json.load(open('$W/decode-step.json')): print(r['kv_path'], r['graph'], round(r['step_us']/1e3,2), round(r['ratio'],2), round(r['overhead_pct'],2))"
grep -E "moe\.|attn.o_proj" $W/b1-graph0.report.md | head -8
(cd $OUT && tar czf h4.tar.gz h4 && rm -rf h4)
