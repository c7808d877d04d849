#!/usr/bin/env bash
# Session 24, call S24e. S24d (ncu, o_proj): the GEMM's consumers are issue-bound, not memory-bound: 0.43 issued
# instructions per cycle and scheduler, "fixed latency" the top stall, DRAM 23% busy at N 128 (42% at N 32). Per unit
# each consumer thread divided out its column block, row block and token tile (~6 integer divisions), and loaded the
# token scales one float at a time. Now a cursor steps them, and the scales come as float2.
# Predicted: o_proj m 32 48.3 -> ~42 us, m 128 81.8 -> ~70 us (fewer instructions per unit; HBM not the bound).
# The GEMM's GPU test (both cuts, every token tile), then the linear bench.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s24e
device_round_test kernels_gpu_linear_fp8 120 --gtest_filter='*Wgmma*'; t=$?
if [ $t != 0 ]; then grep -E "^fp8 wgmma" $W/kernels_gpu_linear_fp8.log; device_round_pack; exit 0; fi
timeout 150 $BIN/glm5prof bench kernels --only linear --quick --out $W/linear.json > $W/linear.txt 2> $W/linear.err
echo "bench linear rc=$?"; tail -1 $W/linear.err
python3 -c "
import json
for r in json.load(open('$W/linear.json')):
    if 'wgmma' in r['kernel'] or (r['kernel'] == 'linear_fp8_mma' and r['batch'] == 8) or r['kernel'] == 'copy_d2d':
        print(r['kernel'], 'm', r['batch'], 'n', r.get('n'), 'k', r.get('k'), round(r['median_us'], 2), 'us', round(r['achieved_gbps']), 'GB/s')
" 2>&1 | head -40
device_round_pack
