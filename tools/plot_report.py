#!/usr/bin/python3
"""Plots and an offline report.html for a glm5prof report.json or compare.json (matplotlib, Debian
python3-matplotlib).

Usage: tools/plot_report.py REPORT.json|COMPARE.json [OUT_DIR]   (OUT_DIR defaults to the file's folder)

For a compare.json: step time against context length, one line per KV path, one panel per pool size
and batch (the crossovers are where the lines cross).

Writes, per run: a stacked bar of op-group time per layer; for all runs: step time per KV path split into
cast / attention / rest; a roofline (achieved TFLOP/s against arithmetic intensity, per op, with the
measured copy and BF16 ceilings); and report.html embedding every figure as base64 PNG (no network).
"""
import base64, html, io, json, os, sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

GROUPS = [("KV cast", lambda op: op in ("attn.kv_cast", "attn.kv_gather_cast")),
          ("indexer", lambda op: op.startswith("attn.indexer")),
          ("MLA attention", lambda op: op in ("attn.mla", "attn.q_absorb", "attn.v_unabsorb")),
          ("attention proj/norm", lambda op: op.startswith("attn.")),
          ("MoE experts", lambda op: op == "moe.experts"),
          ("MLP / shared expert", lambda op: op.startswith("mlp.") or op.startswith("moe.")),
          ("collectives", lambda op: op.startswith("comm.")),
          ("other", lambda op: True)]


def group_of(op):
    for name, match in GROUPS:
        if match(op):
            return name


def png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def per_layer_figure(run):
    layers = sorted({c["layer"] for c in run["layer_ops"] if c["layer"] >= 0})
    data = {g: [0.0] * len(layers) for g, _ in GROUPS}
    index = {l: i for i, l in enumerate(layers)}
    for c in run["layer_ops"]:
        if c["layer"] >= 0:
            data[group_of(c["op"])][index[c["layer"]]] += c["time_us"]
    fig, ax = plt.subplots(figsize=(12, 4))
    bottom = [0.0] * len(layers)
    for g, _ in GROUPS:
        if any(data[g]):
            ax.bar(layers, data[g], bottom=bottom, label=g, width=0.9)
            bottom = [b + v for b, v in zip(bottom, data[g])]
    ax.set_xlabel("layer")
    ax.set_ylabel("µs per step")
    ax.set_title(f"run '{run['name']}': time per layer by op group")
    ax.legend(fontsize=8, ncol=4)
    return fig


def paths_figure(runs):
    names = [r["name"] for r in runs]
    cast = [r.get("cast_us", 0) / 1000 for r in runs]
    attn = [max(0.0, (r.get("attention_us", 0) - r.get("cast_us", 0)) / 1000) for r in runs]
    rest = [max(0.0, r["steps"]["median_us"] / 1000 - c - a) for r, c, a in zip(runs, cast, attn)]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(names, cast, label="KV cast", color="tab:red")
    ax.bar(names, attn, bottom=cast, label="attention (rest)", color="tab:blue")
    ax.bar(names, rest, bottom=[c + a for c, a in zip(cast, attn)], label="everything else", color="tab:gray")
    ax.set_ylabel("step time [ms] (median)")
    ax.set_title("decode step per KV path")
    ax.legend(fontsize=8)
    return fig


def roofline_figure(run, copy_gbps, bf16_tflops):
    fig, ax = plt.subplots(figsize=(7, 5))
    xs = [10 ** (i / 10) for i in range(-30, 41)]
    if copy_gbps and bf16_tflops:
        ax.plot(xs, [min(bf16_tflops, x * copy_gbps / 1000) for x in xs], "k-", lw=1, label="measured ceilings")
    for o in run["ops"]:
        if o.get("bytes", 0) > 0 and o.get("flops", 0) > 0 and o.get("time_us", 0) > 0:
            ai = o["flops"] / o["bytes"]
            ax.scatter(ai, o["achieved_tflops"], s=20)
            ax.annotate(o["op"], (ai, o["achieved_tflops"]), fontsize=6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(f"roofline, run '{run['name']}'")
    ax.legend(fontsize=8)
    return fig


def compare_figures(cmp):
    figures = []
    series = {}
    for p in cmp["points"]:
        if "paths" in p:
            series.setdefault((p["batch"], p["pool_tokens"]), []).append(p)
    for (batch, pool), pts in sorted(series.items()):
        pts.sort(key=lambda p: p["context"])
        fig, ax = plt.subplots(figsize=(7, 4))
        for path in ("cast", "gather-cast", "fp8"):
            xs = [p["context"] for p in pts if path in p["paths"]]
            ys = [p["paths"][path]["step_us"] / 1000 for p in pts if path in p["paths"]]
            if xs:
                ax.plot(xs, ys, marker="o", label=path)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context [tokens]")
        ax.set_ylabel("step time [ms]")
        ax.set_title(f"batch {batch}, KV pool {pool} tokens")
        ax.legend(fontsize=8)
        figures.append((f"step vs context, batch {batch}, pool {pool}", png(fig)))
    return figures


def write_html(out, title, header, figures, extra_md=None):
    parts = ["<!doctype html><meta charset='utf-8'><title>" + html.escape(title) + "</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}img{max-width:100%}</style>",
             "<h1>" + html.escape(title) + "</h1>"] + [f"<p>{html.escape(h)}</p>" for h in header]
    for name, data in figures:
        fname = name.replace(" ", "_").replace(",", "").replace("/", "-") + ".png"
        with open(os.path.join(out, fname), "wb") as f:
            f.write(data)
        parts.append(f"<h2>{html.escape(name)}</h2><img src='data:image/png;base64,{base64.b64encode(data).decode()}'>")
    if extra_md and os.path.exists(extra_md):
        parts.append("<h2>" + html.escape(os.path.basename(extra_md)) + "</h2><pre>" + html.escape(open(extra_md).read()) + "</pre>")
    tmp = os.path.join(out, "report.html.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(parts))
    os.replace(tmp, os.path.join(out, "report.html"))
    print(f"wrote {os.path.join(out, 'report.html')} and {len(figures)} PNG figures")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(path))
    try:
        report = json.load(open(path))
        if str(report.get("schema_version", "")).startswith("glm5prof.compare/"):
            os.makedirs(out, exist_ok=True)
            write_html(out, "glm5prof compare", [f"device: {(report.get('device') or {}).get('name', '?')}"],
                       compare_figures(report), os.path.join(os.path.dirname(os.path.abspath(path)), "compare.md"))
            return
        runs = report["runs"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"plot_report: '{path}': not a glm5prof report.json or compare.json ({e})")
    os.makedirs(out, exist_ok=True)
    device = report.get("device") or {}
    figures = [("decode step per KV path", png(paths_figure(runs)))]
    for r in runs:
        figures.append((f"per-layer time, {r['name']}", png(per_layer_figure(r))))
    figures.append((f"roofline, {runs[-1]['name']}",
                    png(roofline_figure(runs[-1], device.get("copy_gbps_measured"), device.get("bf16_tflops")))))
    write_html(out, "glm5prof report", [json.dumps(report.get("run_spec", {})), f"device: {device.get('name', '?')}"],
               figures, os.path.join(os.path.dirname(os.path.abspath(path)), "report.md"))


if __name__ == "__main__":
    main()
