#!/usr/bin/env bash
# Session 23, call S23d. The block-scaled FP8 tensor-core GEMM (kernels/sm90a/linear_fp8_wgmma.cu,
# --fp8-large-m wgmma): S23c showed batch 128 spending ~33 ms per step in FP8 projections that dequantize W to BF16
# and run cuBLASLt (o_proj 185 us per layer for 100 MB, 5.6x its floor). Predicted: o_proj at batch 128 ~30-40 us
# (memory-bound at ~3 TB/s), the batch-128 step -20 to -26 ms; at batch 32 (now linear_fp8_mma at ~34% of its floor)
# -5 to -10 ms if the kernel beats it there.
# Tests first (kernels_gpu_linear_fp8: the new GpuLinearFp8.WgmmaMatchesCpuTwin and the rest); the linear bench (m up
# to 128, every variant against its twin); the step A/B at batch 128 (8192) and 32 (32768).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8; .device/shared as in S23a; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s23d
device_round_test kernels_gpu_linear_fp8 200 --gtest_filter='*Wgmma*'; t=$?
grep -E "^fp8 wgmma" $W/kernels_gpu_linear_fp8.log
if [ $t != 0 ]; then device_round_pack; exit 0; fi
device_round_test kernels_gpu_linear_fp8 200
timeout 240 $BIN/glm5prof bench kernels --only linear --out $W/linear.json > $W/linear.txt 2> $W/linear.err
echo "bench linear rc=$?"; tail -2 $W/linear.err
python3 -c "
import json
for r in json.load(open('$W/linear.json')):
    if r['kernel'].startswith('linear_fp8') and r['batch'] >= 16:
        print(r['kernel'], 'm', r['batch'], 'n', r.get('n'), 'k', r.get('k'), round(r['median_us'], 2), 'us', round(r['achieved_gbps']), 'GB/s', r.get('check', '')[-40:])
" 2>&1 | head -60
OPS="attn.o_proj|attn.q_b_proj|attn.q_a_proj|attn.kv_a_proj|moe.shared.gate_up|moe.shared.down|moe.experts"
for x in A B B A; do
  r=$(( ${r:-0} + 1 )); [ $x = A ] && a=wgmma || a=dequant
  device_round_profile b128-$r-$x 128 8192 "$OPS" --fp8-large-m $a
done
r=0
for x in A B B A; do
  r=$((r + 1))
  if [ $x = A ]; then device_round_profile b32-$r-$x 32 32768 "$OPS" --fp8-mma-max-m 16 --fp8-large-m wgmma
  else device_round_profile b32-$r-$x 32 32768 "$OPS"; fi
done
device_round_pack
