#!/usr/bin/env python3
"""Cross-check our trace export with HolisticTraceAnalysis (issue 5, "Trace export").

    python3 tools/hta_check.py TRACE REPORT [--tolerance-us 1.0] [--hta-rounding]

TRACE is a trace.json written by `glm5prof profile` (or any Chrome trace our writer produced), REPORT
the report.json of the same run. HTA (pip install HolisticTraceAnalysis) loads TRACE the way it loads
a torch.profiler trace, and its get_gpu_kernel_breakdown (all kernels: duration_ratio 1, no "others"
bucket, memory kernels included) must list the kernels of our report.json `top_kernels` with the same
names, the same call counts and total durations within --tolerance-us (1 us: our totals are exact ns
sums, printed in us).

What the comparison needs to be fair, and what the script does about it:
- HTA rounds ns-resolution timestamps (ts up, end down, to whole us) unless HTA_DISABLE_NS_ROUNDING=1;
  that loses up to 2 us per kernel, so the script sets it (--hta-rounding keeps HTA's default and
  only reports how far the rounded totals are off).
- report.json lists at most 20 kernels per run, and a `--kv-path all` trace holds several runs: the
  totals are summed over runs, and a kernel absent from a run whose list is full (truncated) cannot
  be summed exactly; such kernels are skipped (counted in the summary).
- Our analysis ignores device work outside the measured steps (args.step < 0 or absent: warm-up,
  uploads) when the trace has measured steps; if the trace holds such events, HTA is given a copy
  without them (said on stdout).
- A CPU-backend (host-clock) trace has no GPU kernels (device -1, no stream): HTA's GPU kernel
  breakdown has nothing to read. The script says so and exits 2.

Exit status: 0 equal, 1 a difference (listed, lines with MISMATCH), 2 nothing comparable / bad input.
"""
import argparse
import gzip
import json
import os
import sys
import tempfile

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def load_json(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def is_gpu_event(e):
    args = e.get("args") or {}
    return (e.get("ph") == "X" and e.get("cat") in DEVICE_CATS and isinstance(args.get("stream"), int)
            and args.get("stream", -1) >= 0 and args.get("device", -1) >= 0)


def expected_from_report(report):
    """{name: (calls, total_us)} summed over runs, and the names that cannot be summed exactly."""
    runs = report.get("runs") or []
    if not runs:
        raise SystemExit("hta_check: report has no runs")
    totals, skipped = {}, set()
    lists = [{k["name"]: k for k in (run.get("top_kernels") or [])} for run in runs]
    truncated = [len(run.get("top_kernels") or []) >= 20 for run in runs]
    for listed in lists:
        for name, k in listed.items():
            c, t = totals.get(name, (0, 0.0))
            totals[name] = (c + int(k["calls"]), t + float(k["total_us"]))
    for name in totals:
        if any(trunc and name not in listed for listed, trunc in zip(lists, truncated)):
            skipped.add(name)
    # The smallest total a truncated run still lists: a kernel missing from every list may be below it.
    floor_us = sum(min((k["total_us"] for k in listed.values()), default=0.0)
                   for listed, trunc in zip(lists, truncated) if trunc)
    return totals, skipped, any(truncated), floor_us


def hta_breakdown(trace_path, rounding):
    """HTA's kernel breakdown of one trace: {name: (calls, sum_us)} and the rank HTA read."""
    if not rounding:
        os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    import logging
    logging.getLogger("hta").setLevel(logging.ERROR)
    from hta.common.trace_file import create_rank_to_trace_dict
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory(prefix="hta_check_") as d:
        name = "trace.json.gz" if trace_path.endswith(".gz") else "trace.json"
        link = os.path.join(d, name)
        os.symlink(os.path.abspath(trace_path), link)
        # How HTA maps files to ranks: the regex "rank":\s+(\d+) (warns and assumes 0 when absent).
        import re
        opener = gzip.open if trace_path.endswith(".gz") else open
        with opener(trace_path, "rt") as f:
            head = f.read(1 << 16)
        m = re.search(r'"rank":\s+(\d+)', head)
        rank_note = ("rank %s from distributedInfo" % m.group(1)) if m else "NO rank found in the first 64 KiB"
        _, rank_map = create_rank_to_trace_dict([link])
        ta = TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
        _, kernels = ta.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0, num_kernels=10**9,
                                                 include_memory_kernels=True)
        # Call counts from HTA's own parsed events (the breakdown has sum/mean, not counts).
        counts = {}
        sym = ta.t.symbol_table.get_sym_table()
        for rank, df in ta.t.traces.items():
            gpu = df[df["stream"].ne(-1)]
            for sid, n in gpu.groupby("name").size().items():
                counts[sym[sid]] = counts.get(sym[sid], 0) + int(n)
    out = {}
    for _, row in kernels.iterrows():
        n = row["name"]
        c, s = out.get(n, (0, 0.0))
        out[n] = (c, s + float(row["sum (us)"]))
    for n in out:
        out[n] = (counts.get(n, 0), out[n][1])
    return out, rank_note, sorted(rank_map.keys())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("report")
    ap.add_argument("--tolerance-us", type=float, default=1.0)
    ap.add_argument("--hta-rounding", action="store_true",
                    help="keep HTA's default ns rounding (totals then differ by up to 2 us per kernel)")
    a = ap.parse_args()

    try:
        trace = load_json(a.trace)
        report = load_json(a.report)
    except (OSError, ValueError) as e:
        print("hta_check: cannot read input: %s" % e)
        return 2
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    gpu = [e for e in events if is_gpu_event(e)]
    if not gpu:
        src = (trace.get("glm5prof") or {}).get("source", "?") if isinstance(trace, dict) else "?"
        print("hta_check: %s has no GPU kernel events (source %s: host-clock kernels run on device -1 with no "
              "stream); HTA's GPU kernel breakdown needs a CUDA (CUPTI) trace -- nothing to compare" % (a.trace, src))
        return 2

    hta_input = a.trace
    tmp = None
    # Our analysis keeps device work of steps >= 0 when any has a step (src/analysis/analysis.cpp): events
    # with step < 0 or no step at all (warm-up, uploads before the first step range) do not count.
    def step_of(e):
        v = (e.get("args") or {}).get("step")
        return v if isinstance(v, int) else -1
    warm = [e for e in gpu if step_of(e) < 0]
    measured = [e for e in gpu if step_of(e) >= 0]
    if warm and measured:
        drop = set(id(e) for e in warm)
        trace["traceEvents"] = [e for e in events if id(e) not in drop]
        tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(trace, tmp)
        tmp.close()
        hta_input = tmp.name
        print("hta_check: %d device events outside the measured steps (warm-up, uploads: step < 0 or none) left "
              "out of HTA's input, as our analysis leaves them out" % len(warm))
    try:
        hta, rank_note, ranks = hta_breakdown(hta_input, a.hta_rounding)
    finally:
        if tmp:
            os.unlink(tmp.name)

    ours, skipped, truncated, floor_us = expected_from_report(report)
    print("hta_check: %s: %d GPU kernel events; HTA read %s (ranks %s), %d kernel names"
          % (a.trace, len(gpu), rank_note, ranks, len(hta)))
    bad = 0
    print("%-70s %8s %14s %8s %14s %9s" % ("kernel", "calls", "ours [us]", "HTA", "HTA [us]", "diff"))
    for name in sorted(ours, key=lambda n: -ours[n][1]):
        c, t = ours[name]
        hc, ht = hta.get(name, (0, 0.0))
        short = name if len(name) <= 70 else name[:67] + "..."
        if name in skipped:
            print("%-70s %8d %14.3f %8d %14.3f %9s" % (short, c, t, hc, ht, "skipped"))
            continue
        ok = name in hta and hc == c and abs(ht - t) <= a.tolerance_us
        if not ok and not a.hta_rounding:
            bad += 1
        print("%-70s %8d %14.3f %8d %14.3f %9.3f%s" % (short, c, t, hc, ht, ht - t, "" if ok else "  MISMATCH"))
    # Kernels HTA sees that our report does not list: a real difference unless our lists were
    # truncated and the kernel is below what a full list still shows.
    for name, (hc, ht) in sorted(hta.items(), key=lambda kv: -kv[1][1]):
        if name in ours:
            continue
        if truncated and ht <= floor_us + a.tolerance_us:
            continue
        bad += 1
        print("%-70s %8s %14s %8d %14.3f %9s  MISMATCH (not in report.json)" % (name[:70], "-", "-", hc, ht, "-"))
    compared = len(ours) - len(skipped)
    if a.hta_rounding:
        print("hta_check: HTA's default ns rounding kept; differences above are HTA's rounding (informational)")
        return 0
    if compared == 0:
        print("hta_check: nothing comparable (every kernel was skipped)")
        return 2
    if bad:
        print("hta_check: MISMATCH: %d of %d kernels differ between HTA and report.json" % (bad, compared))
        return 1
    print("hta_check: OK: HTA's kernel breakdown equals report.json for %d kernels (names, calls, totals within "
          "%.3g us)%s" % (compared, a.tolerance_us, ", %d skipped (truncated lists)" % len(skipped) if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
