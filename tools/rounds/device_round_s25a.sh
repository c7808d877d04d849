#!/usr/bin/env bash
# Session 25, call S25a. Session 24's final build (HEAD 44919aa) had not run its last plan rule (stream-K only for
# token tiles >= 64) nor the scalar-partial case (n 302, m 5, N 8) on a GPU: the GEMM's tests and the graph tests
# first. Then issue 4's FP8-weight rows at batch 32 and 128 (graphs) on the cursor build (predicted from the S24e
# bench: batch 128 ~-2 ms against S24c's 250.8, batch 32 ~-0.3 ms against 149.6), and the MoE kernel bench at
# batch 8 / 32 / 128 (the baseline of a TMA-fed expert kernel: moe.experts is 82% of the batch-128 step).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8 engine_gpu_graph; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s25a
device_round_test kernels_gpu_linear_fp8 150 --gtest_filter='*Wgmma*'
device_round_test engine_gpu_graph 200
OPS="moe.experts|attn.o_proj|attn.q_b_proj|attn.mla"
device_round_step "32 128" fp8 "1" 260 "$OPS"
timeout 150 $BIN/glm5prof bench kernels --only moe --out $W/moe.json > $W/moe.txt 2> $W/moe.err
echo "bench moe rc=$?"; tail -1 $W/moe.err
python3 -c "
import json
for r in json.load(open('$W/moe.json')):
    print(r['kernel'], 'b', r['batch'], round(r['median_us'], 1), 'us', round(r['achieved_gbps']), 'GB/s', round(r.get('roofline_fraction', 0), 3))
" 2>&1 | head -40
device_round_pack
