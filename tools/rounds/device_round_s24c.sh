#!/usr/bin/env bash
# Session 24, call S24c. S24b: stream-K helped o_proj (k 16384: m 128 92.5 -> 81.6 us, m 32 51.5 -> 47.3) but slowed
# the short-k projections (gate+up m 128 32.7 -> 38.0; in the batch-32 step q_a, q_b, shared gate_up / down each
# +100..300 us per step): a tile's end costs ~3 units. The plan now takes stream-K only where its cost model (units +
# 3 per tile end, worst CTA) beats split-K: o_proj and the like. Also a layout experiment in the bench:
# linear_fp8_wgmma_tiled, W block-contiguous (each TMA box one 16 KB read instead of 128 rows of 128 B at the row
# stride): every FP8 kernel of the bench sits at ~2.3 TB/s on o_proj (43 us at m 8, mma.sync, GEMV and wgmma alike).
# Tests (the GEMM's cases), the linear bench, then step A/Bs at batch 32 and 128: the default cut vs split-K.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8; .device/shared as in S23a; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s24c
device_round_test kernels_gpu_linear_fp8 200 --gtest_filter='*Wgmma*'; t=$?
if [ $t != 0 ]; then grep -E "^fp8 wgmma" $W/kernels_gpu_linear_fp8.log; device_round_pack; exit 0; fi
timeout 240 $BIN/glm5prof bench kernels --only linear --quick --out $W/linear.json > $W/linear.txt 2> $W/linear.err
echo "bench linear rc=$?"; tail -2 $W/linear.err
python3 -c "
import json
for r in json.load(open('$W/linear.json')):
    if 'wgmma' in r['kernel'] or (r['kernel'].startswith('linear_fp8_mma') and r['batch'] == 8) or r['kernel'] in ('read_stream', 'copy_d2d'):
        print(r['kernel'], 'm', r['batch'], 'n', r.get('n'), 'k', r.get('k'), round(r['median_us'], 2), 'us', round(r['achieved_gbps']), 'GB/s', r.get('check', '')[-60:])
" 2>&1 | head -70
OPS="attn.o_proj|attn.q_b_proj|attn.q_a_proj|attn.kv_a_proj|moe.shared.gate_up|moe.shared.down"
device_round_ab_at 32 32768 "$OPS" "A B B A" "--fp8-wgmma-cut stream-k" "--fp8-wgmma-cut split-k"
device_round_ab_at 128 8192 "$OPS" "A B B A" "--fp8-wgmma-cut stream-k" "--fp8-wgmma-cut split-k"
# What bounds the GEMM at N = 128 (o_proj, m 128: its first launch, the bench's twin check): ncu's sections.
timeout 200 ncu --kernel-name-base demangled --kernel-name 'regex:wgmma_kernel<128>' --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
  $BIN/glm5prof bench kernels --only linear --quick --out $W/ncu-linear.json > $W/ncu128.txt 2> $W/ncu128.err
echo "ncu rc=$?"
grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Compute \(SM\)|Stall|Warp Cycles|Issued|Mem Busy|Max Bandwidth|Achieved Occupancy" $W/ncu128.txt | head -40
device_round_pack
