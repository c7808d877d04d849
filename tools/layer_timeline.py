#!/usr/bin/env python3
"""One decode layer's kernels from a glm5prof trace.json(.gz): op, stream, grid, start and end in us from the layer's
first kernel; then the median over the layers with as many kernels of each kernel's start and end, so a single
layer's noise does not mislead.

Usage: tools/layer_timeline.py TRACE [--layer N] [--step S]
  TRACE   trace.json or trace.json.gz written by `glm5prof profile` (kernel events carry args step / layer / op)
  --layer the layer to print (default 40)
  --step  the step (default: the last step in the trace, the node-level attribution step with graphs)
Exit status 1 with one line on stderr when the file is missing, unreadable or holds no kernels of that layer.
"""
import argparse
import gzip
import json
import statistics
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--layer", type=int, default=40)
    ap.add_argument("--step", type=int, default=None)
    a = ap.parse_args()
    try:
        events = load(a.trace)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"layer_timeline: {a.trace}: cannot read a Chrome trace ({e})")
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel" and "layer" in e.get("args", {})]
    if not kernels:
        sys.exit(f"layer_timeline: {a.trace}: no kernel events with args.layer")
    step = a.step if a.step is not None else max(e["args"].get("step", -1) for e in kernels)
    kernels = [e for e in kernels if e["args"].get("step", -1) == step]
    by_layer = {}
    for e in kernels:
        by_layer.setdefault(e["args"]["layer"], []).append(e)
    mine = sorted(by_layer.get(a.layer, []), key=lambda e: e["ts"])
    if not mine:
        sys.exit(f"layer_timeline: {a.trace}: step {step} has no kernels of layer {a.layer}")
    t0 = mine[0]["ts"]
    print(f"step {step}, layer {a.layer}: {len(mine)} kernels, {mine[-1]['ts'] + mine[-1]['dur'] - t0:.1f} us")
    print(f"{'op':32} {'stream':>6} {'grid':>14} {'start':>7} {'end':>7} {'dur':>6}  kernel")
    for e in mine:
        g = "x".join(str(x) for x in e["args"].get("grid", []))
        print(f"{e['args'].get('op', ''):32} {e['tid']:>6} {g:>14} {e['ts'] - t0:7.1f} {e['ts'] + e['dur'] - t0:7.1f} "
              f"{e['dur']:6.1f}  {e['name'][:60]}")
    # Medians over the layers with the same op sequence length as this one (the MoE layers, or the dense ones).
    spans = {}
    lengths = []
    for layer, ks in by_layer.items():
        if len(ks) != len(mine):
            continue
        ks = sorted(ks, key=lambda e: e["ts"])
        l0 = ks[0]["ts"]
        lengths.append(ks[-1]["ts"] + ks[-1]["dur"] - l0)
        for i, e in enumerate(ks):
            spans.setdefault((i, e["args"].get("op", "")), []).append((e["ts"] - l0, e["ts"] + e["dur"] - l0))
    print(f"\nmedian over {len(lengths)} layers of {len(mine)} kernels: {statistics.median(lengths):.1f} us per layer")
    for (i, op), v in sorted(spans.items()):
        print(f"{op:32} start {statistics.median(s for s, _ in v):7.1f} end {statistics.median(t for _, t in v):7.1f}")


if __name__ == "__main__":
    main()
