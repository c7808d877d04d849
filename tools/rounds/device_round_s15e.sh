#!/usr/bin/env bash
# Session 15, call S15e: why the tensor-core absorb kernels sit at ~25% of their byte floor. Nsight Compute on every
# tc_gemm_kernel launch of `bench kernels --only absorb --reps 1 --warmup 0`: time, grid, registers, achieved
# occupancy, DRAM throughput and the main warp-stall reasons (per issued instruction).
# Usage: tools/device_pack.sh build-lead glm5prof; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s15e
M=gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio,smsp__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
timeout 400 ncu --csv --print-units base -k regex:tc_gemm_kernel --metrics $M $BIN/glm5prof bench kernels --only absorb --reps 1 --warmup 0 > $W/ncu.csv 2> $W/ncu.err
echo "ncu rc=$?"; tail -2 $W/ncu.err
python3 - $W/ncu.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; mi = h.index("Metric Name"); vi = h.index("Metric Value"); ni = h.index("ID"); ki = h.index("Kernel Name")
by = {}
for r in rows[1:]:
    d = by.setdefault(r[ni], {"k": r[ki]}); d[r[mi]] = r[vi]
short = lambda n: n.replace("smsp__average_warps_issue_stalled_", "").replace("_per_issue_active.ratio", "")
for k, m in by.items():
    stalls = sorted(((float(v.replace(',', '')), short(n)) for n, v in m.items() if "stalled" in n), reverse=True)[:4]
    print(f"{k:>4} {m['k'][:32]:32} grid {m.get('launch__grid_size')} {float(m['gpu__time_duration.sum'])/1000:7.2f} us"
          f" regs {m.get('launch__registers_per_thread')} occ {float(m['sm__warps_active.avg.pct_of_peak_sustained_active']):5.1f}%"
          f" dram {float(m['dram__throughput.avg.pct_of_peak_sustained_elapsed']):5.1f}%"
          f" hmma {float(m['smsp__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active']):5.1f}% "
          + " ".join(f"{n} {v:.2f}" for v, n in stalls))
PY
device_round_pack
