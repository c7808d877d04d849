#!/usr/bin/env python3
"""Record small torch.profiler (Kineto) traces of an MLA-like decode on a GPU, with and without a
full-pool FP8 -> BF16 KV cast, for `glm5prof analyze` (issue 5: analysis of existing traces).

    python3 tools/record_torch_trace.py OUTDIR [--pool-tokens 65536] [--layers 4] [--batch 4]
                                               [--glm5prof BIN]

Writes OUTDIR/torch_mla_fp8_cast.json.gz and OUTDIR/torch_mla_bf16_nocast.json.gz (a few hundred KB).
Each decode step runs `layers` layers of absorbed MLA over a latent KV pool of `pool_tokens` rows x
576 (kv_lora_rank 512 + rope 64, DeepSeek/GLM-5 latent), batch requests, 16 heads (one TP8 shard of
128):
  (a) cast:   the pool is stored as torch.float8_e4m3fn (with a per-pool scale) and each layer casts
              all of it to bfloat16 with `.to(torch.bfloat16)` -- aten::to -> aten::_to_copy ->
              aten::copy_ -> an elementwise copy kernel -- before attention, as SGLang's MLA path does
              when its attention backend cannot read FP8;
  (b) nocast: the pool is stored as bfloat16 and attention reads it directly.
Attention is plain torch: scores = q @ kv^T (scaled), softmax, o = p @ kv[:, :512], per request over
the first `context` rows. Steps are profiler steps (ProfilerStep#N), layers record_function ranges
"layer.N", the cast "kv_cast".

With --glm5prof BIN the script runs `BIN analyze` on both traces and checks that the pool cast is
found: the cast trace's kv_dtype_cast time must be at least 5x the no-cast trace's and at least 5% of
its step (exit 1 otherwise). The no-cast trace is not cast-free: each attention casts its fp32 softmax
to bf16 (`.to(torch.bfloat16)`, a small aten::copy_), which analyze counts too (~1% of the step on the
H200 run of 2026-11-29, against 15% with the pool cast).
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile


def record(outdir, cast, a):
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    dev = torch.device("cuda")
    torch.manual_seed(0)
    lat, rope, heads = 512, 64, 16
    width = lat + rope
    pools = []
    for _ in range(a.layers):
        x = torch.randn(a.pool_tokens, width, device=dev, dtype=torch.float32)
        pools.append(x.to(torch.float8_e4m3fn) if cast else x.to(torch.bfloat16))
    scale = torch.tensor(0.5, device=dev, dtype=torch.bfloat16)
    q = torch.randn(a.batch, heads, width, device=dev, dtype=torch.bfloat16)
    ctx = min(a.context, a.pool_tokens)
    # Rows of each request: a contiguous block of the pool (request b reads rows [b*off, b*off+ctx)).
    off = max(0, (a.pool_tokens - ctx) // max(1, a.batch))
    sm_scale = width ** -0.5

    def step():
        out = None
        for layer in range(a.layers):
            with record_function("layer.%d" % layer):
                if cast:
                    with record_function("kv_cast"):
                        kv = pools[layer].to(torch.bfloat16) * scale  # full-pool FP8 -> BF16 dequantize
                else:
                    kv = pools[layer]
                outs = []
                for b in range(a.batch):
                    rows = kv[b * off: b * off + ctx]                       # [ctx, 576]
                    s = torch.matmul(q[b], rows.transpose(0, 1)) * sm_scale  # [heads, ctx]
                    p = torch.softmax(s.float(), dim=-1).to(torch.bfloat16)
                    outs.append(torch.matmul(p, rows[:, :lat]))              # [heads, 512]
                out = torch.stack(outs)
        return out

    for _ in range(2):
        step()
    torch.cuda.synchronize()
    name = "torch_mla_fp8_cast" if cast else "torch_mla_bf16_nocast"
    tmp = tempfile.mkdtemp(prefix="torch_trace_")
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(wait=1, warmup=1, active=a.steps), record_shapes=True) as prof:
            for _ in range(a.steps + 2):
                step()
                torch.cuda.synchronize()
                prof.step()
        raw = os.path.join(tmp, name + ".json")
        prof.export_chrome_trace(raw)
        dst = os.path.join(outdir, name + ".json.gz")
        with open(raw, "rb") as fi, gzip.open(dst, "wb", compresslevel=9) as fo:
            shutil.copyfileobj(fi, fo)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with gzip.open(dst, "rt") as f:
        events = json.load(f).get("traceEvents", [])
    kernels = [e for e in events if e.get("cat") == "kernel"]
    copies = [e for e in kernels if "copy" in e.get("name", "") or "elementwise" in e.get("name", "")]
    print("%s: %d events, %d kernels (%d elementwise/copy), %.0f KB, torch %s, %s" % (
        dst, len(events), len(kernels), len(copies), os.path.getsize(dst) / 1024, torch.__version__,
        torch.cuda.get_device_name(0)))
    return dst


def analyze(binary, trace, rep_dir):
    shutil.rmtree(rep_dir, ignore_errors=True)
    r = subprocess.run([binary, "analyze", trace, "--out", rep_dir], capture_output=True, text=True)
    if r.returncode != 0:
        print("glm5prof analyze %s: exit %d: %s" % (trace, r.returncode, (r.stderr or r.stdout).strip()[-500:]))
        return None
    with open(os.path.join(rep_dir, "report.json")) as f:
        rep = json.load(f)
    hot = [h for run in rep.get("runs", []) for h in run.get("hotspots", []) if h.get("kind") == "kv_dtype_cast"]
    us = sum(h.get("time_us", 0.0) for h in hot)
    share = sum(h.get("share_of_step", 0.0) for h in hot)
    print("  %s: %s" % (os.path.basename(trace), hot[0].get("recommendation", "")[:400] if hot else "no dtype-cast hotspot"))
    return us, share


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--pool-tokens", type=int, default=65536)
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--glm5prof", help="glm5prof binary: run `analyze` on both traces and check the cast is found")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("record_torch_trace: python3 cannot import torch (pip install torch): nothing recorded")
        return 2
    if not torch.cuda.is_available():
        print("record_torch_trace: torch sees no CUDA device: nothing recorded")
        return 2
    if not hasattr(torch, "float8_e4m3fn"):
        print("record_torch_trace: torch %s has no float8_e4m3fn (needs >= 2.1)" % torch.__version__)
        return 2
    os.makedirs(a.outdir, exist_ok=True)
    cast_trace = record(a.outdir, True, a)
    plain_trace = record(a.outdir, False, a)
    if not a.glm5prof:
        return 0
    cast = analyze(a.glm5prof, cast_trace, os.path.join(a.outdir, "analyze_cast"))
    plain = analyze(a.glm5prof, plain_trace, os.path.join(a.outdir, "analyze_nocast"))
    if cast is None or plain is None:
        print("record_torch_trace: glm5prof analyze failed")
        return 1
    ok = cast[0] >= 5 * plain[0] and cast[1] >= 0.05
    print("record_torch_trace: glm5prof analyze %s the pool cast: %.1f us/step (%.1f%% of the step) with it, "
          "%.1f us/step (%.1f%%) without" % ("FINDS" if ok else "DOES NOT FIND", cast[0], 100 * cast[1], plain[0],
                                            100 * plain[1]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
