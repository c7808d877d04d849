#!/usr/bin/env bash
# Session 26, call S26c. S26b: the MoE wgmma path's slot-row quantization (E x K / 128 CTAs, one per expert and column
# block) took 11.3 us per launch in the batch-8 step (two per layer: 1.7 ms per step), 16.3 at batch 128; Nsight
# Compute (serialized, L2 flushed) at batch 1: 18.6 us for x, 8.7 for act, the bucket kernel 9.9. Now the quantization
# runs one CTA per (column block, 64 slot rows), only over the rows that exist (R[E]): batch 8 ~624 CTAs instead of
# 12,288. Predicted: ~4 us per launch, batch 8 step -1.0 ms (59.8 -> ~58.8), 32 and 128 -0.8 to -1.2 ms.
# The GPU tests (the MoE wgmma twin test both splits, the graph and golden tests), the MoE bench (batch 1's grouped
# wgmma path again), issue 4's FP8 rows at batch 8 / 32 / 128 (graphs), ncu per kernel of the FP8 MoE paths.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_grouped engine_gpu_graph engine_gpu_golden;
#        .device/shared holding ../shared/golden and ../shared/configs; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s26c
device_round_test kernels_gpu_moe_grouped 150 --gtest_filter='*Wgmma*'
grep -E "^moe fp8 wgmma" $W/kernels_gpu_moe_grouped.log
device_round_test engine_gpu_graph 150
device_round_test engine_gpu_golden 120
timeout 120 $BIN/glm5prof bench kernels --only moe --out $W/moe.json > $W/moe.txt 2> $W/moe.err
echo "bench moe rc=$?"; tail -1 $W/moe.err
python3 -c "
import json
for r in json.load(open('$W/moe.json')):
    if r['kernel'].startswith('moe_experts_fp8') and not r['kernel'].endswith(('_pf', '_grouped')) or r['kernel'] == 'copy_d2d':
        print(r['kernel'], 'b', r['batch'], round(r['median_us'], 1), 'us', round(r['achieved_gbps']), 'GB/s', round(r.get('roofline_fraction', 0), 3), r.get('check', '')[:44])
" 2>&1 | head -30
device_round_step "8 32 128" fp8 "1" 200 "moe.experts"
for d in $W/step/runs/*/; do echo "== $d"; grep -E "moe_wgmma_quant|moe_group_kernel|moe_combine" $d/report.md | head -3; done
timeout 150 ncu --kernel-name-base demangled --kernel-name regex:"moe_wgmma|moe_gate_up_fp8|moe_down_pair_fp8|moe_group_kernel|moe_combine" \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed --csv \
  --print-units base $BIN/glm5prof bench kernels --only moe --reps 1 --warmup 0 --out $W/ncu-moe.json > $W/ncu.csv 2> $W/ncu.err
echo "ncu rc=$?"; tail -2 $W/ncu.err
python3 - "$W/ncu.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index('Kernel Name'); mi = h.index('Metric Name'); vi = h.index('Metric Value'); ii = h.index('ID')
gi = h.index('Grid Size') if 'Grid Size' in h else None
num = lambda s: float(s.replace(',', '')) if s else 0.0
out = {}
for r in rows[1:]:
    d = out.setdefault(r[ii], {'k': r[ki].split('(')[0][:40], 'g': r[gi] if gi is not None else ''})
    d[r[mi]] = num(r[vi])
for i, d in sorted(out.items(), key=lambda x: int(x[0])):
    print(i, d['k'], d['g'], 'us', round(d.get('gpu__time_duration.sum', 0) / 1e3, 1), 'MB', round(d.get('dram__bytes_read.sum', 0) / 1e6, 1), 'dram%', round(d.get('dram__throughput.avg.pct_of_peak_sustained_elapsed', 0), 1))
PY
device_round_pack
