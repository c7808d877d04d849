#!/usr/bin/env bash
# Session 25, call S25b. New: the routed FP8 experts (batch >= 4) on the FP8 tensor cores fed by TMA
# (kernels/sm90a/moe_fp8_wgmma.h, `--moe-wgmma on`): persistent CTAs, whole tiles, x and act quantized to e4m3.
# S25a's bench: the mma.sync grouped kernels at 84.6% of copy (batch 8), 93.0% (32), 84.7% (128); a 1 GiB read 98%.
# Predicted: ~95% at every batch: batch 128 2654 -> ~2370 us per call (-21 ms per step at 75 MoE layers), batch 8
# 571 -> ~510 us, batch 32 1579 -> ~1550.
# The new GPU test first (GPU vs CPU twin vs exact), then the bench, then step A/Bs (graphs, untraced).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_grouped engine_gpu_graph engine_gpu_golden; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s25b
device_round_test kernels_gpu_moe_grouped 200 --gtest_filter='*Wgmma*'; t=$?
grep -E "^moe fp8 wgmma" $W/kernels_gpu_moe_grouped.log
if [ $t != 0 ]; then device_round_pack; exit 0; fi
timeout 150 $BIN/glm5prof bench kernels --only moe --out $W/moe.json > $W/moe.txt 2> $W/moe.err
echo "bench moe rc=$?"; tail -1 $W/moe.err
python3 -c "
import json
for r in json.load(open('$W/moe.json')):
    if r['kernel'].startswith('moe_experts_fp8') or r['kernel'] == 'copy_d2d':
        print(r['kernel'], 'b', r['batch'], round(r['median_us'], 1), 'us', round(r['achieved_gbps']), 'GB/s', round(r.get('roofline_fraction', 0), 3), r.get('check', '')[:60])
" 2>&1 | head -40
device_round_test engine_gpu_graph 200
device_round_test engine_gpu_golden 200
OPS="moe.experts"
device_round_ab_at 128 8192 "$OPS" "A B B A" "--moe-wgmma on" "--moe-wgmma off"
device_round_ab_at 8 32768 "$OPS" "A B" "--moe-wgmma on" "--moe-wgmma off"
device_round_ab_at 32 32768 "$OPS" "A B" "--moe-wgmma on" "--moe-wgmma off"
device_round_pack
