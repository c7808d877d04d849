#!/usr/bin/env bash
# Device call P2 (2026-11-29, session 4): per-token FP8 MoE kernels with 4-warp CTAs (kFp8TokenWarps, first
# with 2 rows per warp, then 8 rows sharing one activation chunk):
# their GPU test, then the batch-1 decode step (FP8, fp8 KV path, graph) for moe.experts' time.
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/p2; mkdir -p $W
timeout 100 $BIN/kernels_gpu_moe > $W/kernels_gpu_moe.log 2>&1
echo "kernels_gpu_moe rc=$? $(grep -c '^\[       OK' $W/kernels_gpu_moe.log) ok $(grep -c '^\[  FAILED' $W/kernels_gpu_moe.log) failed"
grep -h -B2 -A8 "Failure" $W/*.log | head -30
$BIN/glm5prof profile --model glm5 --kv-path fp8 --batch 1 --context 32768 --pool-tokens 495000 --weights-dtype fp8 \
  --steps 4 --warmup 2 --untraced-steps 3 --graph --out $W/b1 > $W/b1.log 2>&1; echo "b1 rc=$?"; tail -4 $W/b1.log
rm -f $W/b1/trace.json
python3 -c "
import json
r=json.load(open('$W/b1/report.json'))
for run in r['runs']:
  for o in run['ops']:
    if o['op'] in ('moe.experts','attn.o_proj','attn.q_up_proj','attn.qkv_a_proj'): print('  %-20s %8.1f us  %5.1f%% of copy'%(o['op'], o['time_us'], o['pct_copy_peak']))
"
(cd $OUT && tar czf p2.tar.gz p2 && rm -rf p2)
