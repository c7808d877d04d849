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
device_round_bench_moe
device_round_step "8 32 128" fp8 "1" 200 "moe.experts"
for d in $W/step/runs/*/; do echo "== $d"; grep -E "moe_wgmma_quant|moe_group_kernel|moe_combine" $d/report.md | head -3; done
timeout 150 ncu --kernel-name-base demangled --kernel-name regex:"moe_wgmma|moe_gate_up_fp8|moe_down_pair_fp8|moe_group_kernel|moe_combine" \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed --csv \
  --print-units base $BIN/glm5prof bench kernels --only moe --reps 1 --warmup 0 --out $W/ncu-moe.json > $W/ncu.csv 2> $W/ncu.err
echo "ncu rc=$?"; tail -2 $W/ncu.err
device_round_ncu_summary $W/ncu.csv
device_round_pack
