#!/usr/bin/env bash
# Device call S6i (2026-11-30, session 6): the side-by-side record of issue 3 after the wgmma kernel --
# FlashMLA's sparse FP8 decode built from its public source (tools/device_flashmla.sh), then ours in the same
# run (`glm5prof bench kernels --only mla`: every batch, the mma.sync and wgmma kernels), then the decode
# step at batch 1 and 32 (FP8 weights, graphs; Auto now runs the wgmma kernel at batch 32).
#   tools/device_pack.sh build-lead glm5prof; run with carry [".device"] (.device/flashmla-src.tar.xz too)
set -u
W=$OUT/s6i; mkdir -p $W/flashmla
OUT=$W/flashmla FLASHMLA_BUDGET_S=165 FLASHMLA_BENCH_S=60 FLASHMLA_BENCH_ARGS="--batches 1,64,128 --reps 20" \
  timeout 170 bash tools/device_flashmla.sh > $W/flashmla/run.txt 2>&1; echo "flashmla rc=$?"
tail -30 $W/flashmla/flashmla.txt 2>/dev/null || tail -20 $W/flashmla/run.txt
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin
timeout 170 $BIN/glm5prof bench kernels --only mla --reps 20 --out $W/mla.json > $W/mla.txt 2>&1; echo "mla bench rc=$?"
grep -E "^  (mla_decode|copy|gemm)" $W/mla.txt | head -80
BATCHES="1 32" WEIGHTS=fp8 GRAPHS=1 timeout 200 tools/decode_step_bench.sh $BIN/glm5prof $W/step > $W/step.txt 2>&1; echo "step rc=$?"
python3 -c "
import json
for r in json.load(open('$W/step/decode-step.json')):
  if 'skipped' in r: print('skipped', r.get('batch'), r.get('skipped')); continue
  print(r['weights_dtype'], 'b%d'%r['batch'], 'ctx', r['context'], r['kv_path'], 'graph', int(r['graph']), '%.2f ms'%(r['step_us']/1e3), 'ratio %.2f'%r['ratio'], 'traced %.2f'%(r['traced_step_us']/1e3))" 2>&1 | tail -12
rm -rf $W/step/runs/*/trace.json
(cd $OUT && tar czf s6i.tar.gz s6i && rm -rf s6i)
