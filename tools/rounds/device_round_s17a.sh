#!/usr/bin/env bash
# Session 17, call S17a: (1) the read-only HBM ceiling (kernels/read_stream.h, `read_stream` records of bench kernels)
# beside the copy ceiling: whether the batch-1 weight streams (moe.experts at ~75% of copy) sit below what a pure
# read reaches; (2) the MoE down kernel's first weight loads before its PDL wait (MoeExpertsParams::down_early_loads,
# profile --moe-down-early): predicted to hide part of gate_up's tail, ~3-5 us per MoE layer (0.2-0.4 ms per step);
# (3) Nsight Compute on the two per-token MoE kernels and the read stream: DRAM throughput, issue and stall reasons.
#  tests: kernels_gpu_read_stream, GpuMoeFp8 (early loads bitwise), GraphGpu.MoeDownEarly* (logits bitwise);
#  bench kernels --only moe-pair (ceilings incl. read_stream; variants incl. _early);
#  decode step batch 1, --moe-down-early on (A) / off (B), A B B A; ncu.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_read_stream kernels_gpu_linear_fp8 engine_gpu_graph;
#        run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s17a
timeout 60 $BIN/kernels_gpu_read_stream > $W/gpu_read_stream.log 2>&1; echo "GpuReadStream rc=$?"
timeout 100 $BIN/kernels_gpu_linear_fp8 --gtest_filter='GpuMoeFp8.*' > $W/gpu_moe_fp8.log 2>&1; echo "GpuMoeFp8 rc=$?"
timeout 120 $BIN/engine_gpu_graph --gtest_filter='GraphGpu.MoeDownEarly*' > $W/gpu_graph_early.log 2>&1; echo "GraphGpu.MoeDownEarly rc=$?"
grep -hE "^\[  (PASSED|FAILED) |Failure|Expected|Which is" $W/gpu_read_stream.log $W/gpu_moe_fp8.log $W/gpu_graph_early.log | head -12
timeout 150 $BIN/glm5prof bench kernels --only moe-pair --out $W/moe_pair.json > $W/moe_pair.txt 2> $W/moe_pair.err
echo "bench rc=$?"; tail -2 $W/moe_pair.err
python3 - $W/moe_pair.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    if r["kernel"] in ("copy_d2d", "read_stream") or r["kernel"].startswith("moe_experts"):
        print(f'{r["kernel"]:28} {r["bytes"]/1e6:9.1f} MB {r["median_us"]:9.1f} us {r["achieved_gbps"]:7.0f} GB/s  {r["check"][-90:]}')
PY
OPS="moe.experts|moe.shared|attn.norm"
r=0; for x in A B B A; do r=$((r + 1))
  if [ $x = A ]; then device_round_profile b1-$r-A 1 32768 "$OPS" --moe-down-early on; else device_round_profile b1-$r-B 1 32768 "$OPS" --moe-down-early off; fi
done
M=gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,sm__inst_issued.avg.per_cycle_active,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio
timeout 200 ncu --csv --print-units base -k regex:'moe_gate_up_fp8|moe_down_pair_fp8|read_stream' --launch-count 40 --metrics $M \
  $BIN/glm5prof bench kernels --only moe-pair --reps 1 --warmup 0 > $W/ncu.csv 2> $W/ncu.err
echo "ncu rc=$?"; tail -2 $W/ncu.err
python3 tools/ncu_stalls.py $W/ncu.csv
device_round_pack
