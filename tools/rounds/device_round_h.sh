#!/usr/bin/env bash
# Device calls H1 / H2 (2026-11-29, session 3): the session's GPU verification and measurements.
#   h1: every GPU test binary (tools/device_tests.sh, 3 at a time), then bench kernels --only mla,cast,indexer
#   h2: bench kernels --only linear,absorb,moe, then the decode-step benchmark (tools/decode_step_bench.sh):
#       batch 1 FP8 and BF16 weights, graph off and on; batch 8 / 32 / 128 FP8 with graphs.
# Pack first: tools/device_pack.sh build-lead <all *_gpu_* tests> glm5prof. Usage: bash tools/rounds/device_round_h.sh h1|h2
set -u
T0=$(date +%s); el() { echo "[+$(( $(date +%s) - T0 ))s]"; }
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/$1; mkdir -p $W
if [ "$1" = h1 ]; then
  timeout 330 bash tools/device_tests.sh $BIN $W/tests 3 300 > $W/tests.txt 2>&1; echo "tests rc=$? $(el)"
  sed -n '/==== table ====/,$p' $W/tests.txt
  grep -A12 "==== failures ====" $W/tests.txt | head -40
  timeout 200 $BIN/glm5prof bench kernels --only mla,cast,indexer --out $W/kv-kernels.json > $W/kv-kernels.txt 2>&1
  echo "bench rc=$? $(el)"; grep -E "^(kv_|mla_decode_fp8 +(1|64|128) +64|topk +1|indexer_score +1|ceilings)" $W/kv-kernels.txt | head -40
elif [ "$1" = h2 ]; then
  run() { timeout "$2" $BIN/$1 > $W/$1.log 2>&1; echo "$1 rc=$? $(grep -c '^\[       OK' $W/$1.log) ok $(grep -c '^\[  FAILED' $W/$1.log) failed $(el)"; }
  run kernels_gpu_mla_absorb 120 & P1=$!; run kernels_gpu_indexer 120 & P2=$!; run kernels_gpu_topk_paths 120 & P3=$!
  run kernels_gpu_linear_fp8 150 & P4=$!; wait $P1 $P2 $P3 $P4
  run engine_gpu_golden 120 & P1=$!; run engine_gpu_fp8_weights 120 & P2=$!; run engine_gpu_graph 150 & P3=$!; wait $P1 $P2 $P3
  grep -h -B2 -A8 "Failure" $W/*.log | head -40
  timeout 240 $BIN/glm5prof bench kernels --only linear,absorb,moe --reps 15 --out $W/proj-kernels.json > $W/proj-kernels.txt 2>&1
  echo "bench rc=$? $(el)"
  python3 - $W/proj-kernels.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    k = r["kernel"]
    if k.startswith(("linear", "mla_absorb", "mla_unabsorb", "moe")) and (r["batch"] in (1, 2, 8, 32, 64, 128)):
        print(f'{k:26s} b={r["batch"]:3d} h={r["heads"]:2d} n={r.get("n",0):6d} k={r.get("k",0):6d} {r["median_us"]:8.1f} us {100*r["roofline_fraction"]:5.1f}%')
PY
else
  BATCHES=1 WEIGHTS="fp8 bf16" GRAPHS="0 1" timeout 200 tools/decode_step_bench.sh $BIN/glm5prof /tmp/h2a > $W/step-b1.txt 2>&1
  echo "step b1 rc=$? $(el)"; tail -14 $W/step-b1.txt
  BATCHES="8 32 128" WEIGHTS=fp8 GRAPHS=1 timeout 190 tools/decode_step_bench.sh $BIN/glm5prof /tmp/h2b > $W/step-bn.txt 2>&1
  echo "step b8-128 rc=$? $(el)"; tail -12 $W/step-bn.txt
  cp /tmp/h2a/decode-step.json $W/decode-step-b1.json; cp /tmp/h2b/decode-step.json $W/decode-step-bn.json 2>/dev/null
  python3 - $W/decode-step-b1.json $W/decode-step-bn.json <<'PY'
import json, sys
for f in sys.argv[1:]:
    try: recs = json.load(open(f))
    except Exception as e: print(f, e); continue
    for r in recs:
        if "skipped" in r: print("skipped", r["batch"], r["weights_dtype"], r["graph"], r["skipped"][:80]); continue
        print(f'{r["weights_dtype"]:4s} b{r["batch"]:<3d} c{r["context"]:<5d} graph {int(r["graph"])} {r["kv_path"]:11s} '
              f'step {r["step_us"]/1e3:8.2f} ms floor {r["floor_us"]/1e3:7.2f} ratio {r["ratio"]:5.2f} traced +{r["overhead_pct"]:.1f}%')
PY
  for d in /tmp/h2a/runs/b1-c32768-wfp8-graph1 /tmp/h2a/runs/b1-c32768-wfp8-graph0 /tmp/h2b/runs/b32-c32768-wfp8-graph1; do
    [ -f $d/report.md ] && head -c 40000 $d/report.md > $W/$(basename $d).report.md
  done
fi
(cd $OUT && tar czf $1.tar.gz $1 && rm -rf $1); echo "done $(el)"
