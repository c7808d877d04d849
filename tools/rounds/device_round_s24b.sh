#!/usr/bin/env bash
# Session 24, call S24b. The FP8 tensor-core GEMM (kernels/sm90a/linear_fp8_wgmma.cu) now cuts its work stream-K:
# the tiles x 128-column blocks spread evenly over one CTA per SM (o_proj's 48 row blocks ran split-K on 96 of 132
# SMs), and has token tiles of 8 and 16 (batches 2..16, where the mma.sync kernel ran at ~58% of the floor at m 8).
# Predicted: o_proj m 32 42 -> ~31 us, m 128 72.5 -> ~55 us (132 / 96 SMs); m 8 below the mma.sync kernel's 42.9 us.
# Tests (the new cases: N 8 / 16, both cuts), the linear bench, then step A/Bs: batch 32 and 128 stream-K vs split-K
# (--fp8-wgmma-cut), batch 8 with the GEMM (--fp8-mma-max-m 1) vs the mma.sync kernel (16).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8 engine_gpu_graph; .device/shared as in S23a;
# `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s24b
device_round_test kernels_gpu_linear_fp8 200 --gtest_filter='*Wgmma*'; t=$?
grep -E "^fp8 wgmma" $W/kernels_gpu_linear_fp8.log
if [ $t != 0 ]; then device_round_pack; exit 0; fi
device_round_test engine_gpu_graph 120 --gtest_filter='*Wgmma*'
timeout 240 $BIN/glm5prof bench kernels --only linear --quick --out $W/linear.json > $W/linear.txt 2> $W/linear.err
echo "bench linear rc=$?"; tail -2 $W/linear.err
python3 -c "
import json
for r in json.load(open('$W/linear.json')):
    if r['kernel'].startswith('linear_fp8') and r['batch'] >= 2 or 'wgmma' in r['kernel']:
        print(r['kernel'], 'm', r['batch'], 'n', r.get('n'), 'k', r.get('k'), round(r['median_us'], 2), 'us', round(r['achieved_gbps']), 'GB/s', r.get('check', '')[-60:])
" 2>&1 | head -70
OPS="attn.o_proj|attn.q_b_proj|attn.q_a_proj|attn.kv_a_proj|moe.shared.gate_up|moe.shared.down|moe.experts"
device_round_ab_at 32 32768 "$OPS" "A B B A" "--fp8-wgmma-cut stream-k" "--fp8-wgmma-cut split-k"
device_round_ab_at 8 32768 "$OPS" "A B B A" "--fp8-mma-max-m 1" "--fp8-mma-max-m 16"
device_round_ab_at 128 8192 "$OPS" "A B B A" "--fp8-wgmma-cut stream-k" "--fp8-wgmma-cut split-k"
device_round_pack
