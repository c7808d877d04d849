#!/usr/bin/env bash
# Session 26, call S26b. S26a: the MoE wgmma kernels 88.5 / 93.6 / 90.7% of copy at batch 8 / 32 / 128 (mma.sync 82 /
# 88 / 83%); issue 4's FP8 rows (graphs) batch 1 16.37 ms (1.60x), 8 59.78 (1.37), 32 141.12 (1.21), 128 @ 8192
# 227.85 (1.28). The per-token pair path at batch 1: 98.0 us per layer in the bench, 72.6% of copy.
# Now: (1) the MoE bench with the grouped wgmma path also at batch 1 (MoeExpertsParams::group_min_tokens 1): does it
# beat the pair path? Predicted ~85-90 us (8 experts: 256 gate_up tiles and 384 down tiles over 132 CTAs, ~2-3 each,
# so the imbalance is small; at batch 8 the same kernels stream at 88.5%), plus ~5 us for the quantize and combine
# launches. (2) issue 4's whole table on this build: BF16 and FP8 weights, graphs on and off, batch 1 / 8 / 32 / 128.
# (3) ncu per kernel of the FP8 MoE paths (duration, DRAM bytes and throughput), every batch, one timed rep each.
# Usage: tools/device_pack.sh build-lead glm5prof; .device/shared holding ../shared/golden and ../shared/configs
set -u
. tools/device_round_lib.sh
device_round_begin s26b
device_round_bench_moe
device_round_step "1 8 32 128" "bf16 fp8" "0 1" 420 "moe.experts"
timeout 150 ncu --kernel-name-base demangled --kernel-name regex:"moe_wgmma|moe_gate_up_fp8|moe_down_pair_fp8|moe_group_kernel" \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed --csv \
  --print-units base $BIN/glm5prof bench kernels --only moe --reps 1 --warmup 0 --out $W/ncu-moe.json > $W/ncu.csv 2> $W/ncu.err
echo "ncu rc=$?"; tail -2 $W/ncu.err
device_round_ncu_summary $W/ncu.csv
device_round_pack
