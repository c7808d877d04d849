#!/usr/bin/env python3
"""One line per kernel launch of an `ncu --csv --print-units base` file: time, DRAM bytes read, registers, achieved
occupancy, DRAM throughput, issued IPC, L1 throughput and the top stall reasons (cycles per issued instruction).
Launches that read less than MIN_MB of DRAM (correctness checks) are left out.
Usage: tools/ncu_stalls.py NCU.csv [MIN_MB (default 20)]"""
import csv
import sys


def main() -> int:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    min_bytes = float(sys.argv[2]) * 1e6 if len(sys.argv) > 2 else 20e6
    rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
    if not rows:
        sys.exit(f"{sys.argv[1]}: no ncu rows")
    h = rows[0]
    mi, vi, ni, ki = h.index("Metric Name"), h.index("Metric Value"), h.index("ID"), h.index("Kernel Name")
    by = {}
    for r in rows[1:]:
        by.setdefault(r[ni], {"k": r[ki]})[r[mi]] = r[vi]
    short = lambda n: n.replace("smsp__average_warps_issue_stalled_", "").replace("_per_issue_active.ratio", "")
    f = lambda m, n: float(m.get(n, "0").replace(",", ""))
    for k, m in by.items():
        if f(m, "dram__bytes_read.sum") < min_bytes:
            continue
        stalls = sorted(((f(m, n), short(n)) for n in m if "stalled" in n), reverse=True)[:3]
        name = m["k"].replace("(anonymous namespace)::", "").split("(")[0]
        print(f"{k:>4} {name:44} grid {m.get('launch__grid_size'):>6} {f(m, 'gpu__time_duration.sum') / 1000:7.2f} us"
              f" {f(m, 'dram__bytes_read.sum') / 1e6:7.1f} MB regs {m.get('launch__registers_per_thread'):>3}"
              f" occ {f(m, 'sm__warps_active.avg.pct_of_peak_sustained_active'):5.1f}%"
              f" dram {f(m, 'dram__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}%"
              f" ipc {f(m, 'sm__inst_issued.avg.per_cycle_active'):4.2f}"
              f" l1 {f(m, 'l1tex__throughput.avg.pct_of_peak_sustained_active'):5.1f}% "
              + " ".join(f"{n} {v:.2f}" for v, n in stalls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
