#!/usr/bin/env bash
# Session 23, call S23f. The FP8 tensor-core GEMM with two temporaries at N <= 64 (block i + 1's wgmma run while block i
# is promoted), tiles of 64 tokens for m > 64 in the bench (linear_fp8_wgmma_n64; the grid now token tiles first, so
# a row block's tiles read W from L2 after the first), and the new defaults (--fp8-large-m wgmma, --fp8-mma-max-m 16). Predicted: o_proj at m = 32 from 42 us
# toward ~25-30 us in the bench. Tests (kernels_gpu_linear_fp8; engine_gpu_graph with the new
# GraphGpu.Fp8WgmmaProjectionsReplayBitwise at batch 20; engine_gpu_golden), the linear bench, then issue 4's FP8-weight
# table on the new defaults.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8 engine_gpu_graph engine_gpu_golden;
#        .device/shared as in S23a; `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s23f
device_round_test kernels_gpu_linear_fp8 200; a=$?
grep -E "^fp8 wgmma" $W/kernels_gpu_linear_fp8.log
device_round_test engine_gpu_graph 300; b=$?
grep -E "FP8 tensor-core GEMM kernels" $W/engine_gpu_graph.log
device_round_test engine_gpu_golden 200
if [ $a != 0 ] || [ $b != 0 ]; then device_round_pack; exit 0; fi
timeout 200 $BIN/glm5prof bench kernels --only linear --quick --out $W/linear.json > $W/linear.txt 2> $W/linear.err
echo "bench linear rc=$?"; tail -1 $W/linear.err
python3 -c "
import json
for r in json.load(open('$W/linear.json')):
    if r['kernel'].startswith('linear_fp8_wgmma') or (r['kernel'].startswith('linear_fp8') and r['batch'] >= 32):
        print(r['kernel'], 'm', r['batch'], 'n', r.get('n'), 'k', r.get('k'), round(r['median_us'], 2), 'us', round(r['achieved_gbps']), 'GB/s', r.get('check', '')[-22:])
" 2>&1 | head -40
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv,noheader
device_round_step "1 8 32 128" fp8 "1" 280 "attn.o_proj|attn.q_b_proj|moe.shared.gate_up"
device_round_pack
