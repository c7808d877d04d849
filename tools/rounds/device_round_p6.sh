#!/usr/bin/env bash
# Device call P6 (2026-11-29, session 4), run twice: (1) L2 prefetch two loop steps ahead in the FP8 weight streams
# (warp_dots_fp8, the FP8 GEMV) and 3 CTAs per SM for the per-token MoE kernels (Nsight Compute in P5:
# latency-bound at 16 warps per SM); (2) the 3 CTAs per SM alone. Their GPU tests, then the batch-1 decode
# step (FP8, fp8 path, graph).
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/p6; mkdir -p $W
for t in kernels_gpu_moe kernels_gpu_linear_fp8 kernels_gpu_linear_fp8_splitk; do
  timeout 100 $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$? $(grep -c '^\[       OK' $W/$t.log) ok $(grep -c '^\[  FAILED' $W/$t.log) failed"
done
grep -h -B2 -A8 "Failure" $W/*.log | head -20
$BIN/glm5prof profile --model glm5 --kv-path fp8 --batch 1 --context 32768 --pool-tokens 495000 --weights-dtype fp8 \
  --steps 4 --warmup 2 --untraced-steps 3 --graph --out $W/b1 > $W/b1.log 2>&1; echo "b1 rc=$?"; grep "path fp8" $W/b1.log
rm -f $W/b1/trace.json
python3 -c "
import json
r=json.load(open('$W/b1/report.json'))
for run in r['runs']:
  for o in run['ops']:
    if o['op'] in ('moe.experts','attn.o_proj','attn.q_up_proj','attn.qkv_a_proj','mlp.gate_up','mlp.down'): print('  %-20s %8.1f us  %5.1f%% of copy'%(o['op'], o['time_us'], o['pct_copy_peak']))
"
(cd $OUT && tar czf p6.tar.gz p6 && rm -rf p6)
