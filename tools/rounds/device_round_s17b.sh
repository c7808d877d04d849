#!/usr/bin/env bash
# Session 17, call S17b: the batch-1 FP8 MoE kernels' streaming variants (MoeExpertsParams::pair_variant). S17a's
# Nsight Compute: gate_up 64.9 us for 201.5 MB (DRAM 65%), down 39.4 us for 100.8 MB (55%), against a read-only
# stream of the same sizes in 51.7 / 28.7 us; both at IPC 2.1 with L1 at 67-73% of peak, stalled on long scoreboard.
# Variant 2 loads each chunk's activations once for the 4 rows (PTX: 4 ld.global.v4.f32 per chunk before, 1 now);
# variant 3 also double-buffers the weight registers (next step's loads in flight during the math).
# Predicted: 2 lowers L1 traffic ~2.3x (a few % if L1 is the limiter), 3 keeps a warp's bytes in flight through its
# math (~1/3 of a step): up to ~15-20% on both kernels if the stream is latency-bound.
#  tests: GpuMoeFp8 (every variant x early bitwise), GraphGpu.MoeDownEarly*;
#  bench kernels --only moe-pair (7 variants); ncu on the variants; decode step batch 1, 3 settings x 2, interleaved.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8 engine_gpu_graph; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s17b
timeout 100 $BIN/kernels_gpu_linear_fp8 --gtest_filter='GpuMoeFp8.*' > $W/gpu_moe_fp8.log 2>&1; echo "GpuMoeFp8 rc=$?"
timeout 120 $BIN/engine_gpu_graph --gtest_filter='GraphGpu.MoeDownEarly*' > $W/gpu_graph_early.log 2>&1; echo "GraphGpu.MoeDownEarly rc=$?"
grep -hE "^\[  (PASSED|FAILED) |Failure|Expected|Which is" $W/gpu_moe_fp8.log $W/gpu_graph_early.log | head -12
timeout 150 $BIN/glm5prof bench kernels --only moe-pair --out $W/moe_pair.json > $W/moe_pair.txt 2> $W/moe_pair.err
echo "bench rc=$?"; tail -1 $W/moe_pair.err
python3 - $W/moe_pair.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    if r["kernel"] == "copy_d2d" or r["kernel"].startswith("moe_experts") or (r["kernel"] == "read_stream" and r["bytes"] < 5e8):
        print(f'{r["kernel"]:32} {r["bytes"]/1e6:9.1f} MB {r["median_us"]:9.1f} us {r["achieved_gbps"]:7.0f} GB/s')
PY
OPS="moe.experts|moe.shared"
for round in 1 2; do
  device_round_profile b1-$round-v1 1 32768 "$OPS" --moe-pair-variant 1
  device_round_profile b1-$round-v2e 1 32768 "$OPS" --moe-pair-variant 2 --moe-down-early on
  device_round_profile b1-$round-v3e 1 32768 "$OPS" --moe-pair-variant 3 --moe-down-early on
done
M=gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,sm__inst_issued.avg.per_cycle_active,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio
timeout 150 ncu --csv --print-units base -k regex:'moe_gate_up_fp8|moe_down_pair_fp8' --metrics $M \
  $BIN/glm5prof bench kernels --only moe-pair --reps 1 --warmup 0 > $W/ncu.csv 2> $W/ncu.err
echo "ncu rc=$?"; tail -1 $W/ncu.err
python3 tools/ncu_stalls.py $W/ncu.csv
device_round_pack
