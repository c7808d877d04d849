#!/usr/bin/env bash
# Session 26, call S26d. S26c: the quantization over slot-row chunks did not gain (in-step mean per launch 11.1 / 13.7
# / 19.3 us at batch 8 / 32 / 128 against S26b's 11.3 / 11.7 / 16.3): each warp's rows, and the scan's loads, were
# one L2 round trip after another. Now every load of a warp is issued before any is used (4 rows per warp, 32 per
# CTA), the bucket offsets loaded by all threads at once; and the bucket kernel (moe_group_kernel, 6.6-8.3 us in the
# step, ~10 us alone) scans with one warp instead of one thread's loop over 256 experts.
# Predicted: quantization ~4-5 us per launch, bucket kernel ~3 us: ~15 us per MoE layer, ~1.1 ms per step.
# The GPU tests (every kernels_gpu_moe_grouped case: the grouped fp32 kernels bitwise against the per-token path
# exercise the buckets), graph, golden; the MoE bench; issue 4's FP8 rows at batch 8 / 32 / 128 (graphs) with each
# run's MoE kernels (calls, mean us).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_grouped engine_gpu_graph engine_gpu_golden;
#        .device/shared holding ../shared/golden and ../shared/configs; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s26d
device_round_test kernels_gpu_moe_grouped 240
grep -E "^moe fp8 wgmma" $W/kernels_gpu_moe_grouped.log | head -3
device_round_test engine_gpu_graph 150
device_round_test engine_gpu_golden 120
device_round_bench_moe
device_round_step "8 32 128" fp8 "1" 200 "moe.experts"
for d in $W/step/runs/*/; do
  [ -f $d/report.json ] && python3 -c "
import json; run = json.load(open('$d/report.json'))['runs'][0]
print('$d'.split('/')[-2], ' '.join(k['name'].split('(')[0].split('::')[-1] + ' ' + str(k['calls']) + 'x' + str(round(k['mean_us'], 2)) for k in run['top_kernels'] if 'moe' in k['name']))"
done
device_round_pack
