#!/usr/bin/env python3
"""Time FlashMLA's sparse FP8 MLA decode kernel on GLM-5 shapes (issue 3, "measured against FlashMLA").

    PYTHONPATH=<built FlashMLA tree> python3 tools/flashmla_bench.py OUT_JSON [options]

Runs FlashMLA (github:deepseek-ai/FlashMLA, built from source by tools/device_flashmla.sh; never
committed here) through its public Python API only: flash_mla.get_mla_metadata() and
flash_mla.flash_mla_with_kvcache(q, k_cache, None, None, 512, sched_meta, is_fp8_kvcache=True,
indices=...). This harness is ours; no FlashMLA test or benchmark code is used.

Shapes (defaults): batch {1, 8, 32, 64, 128} x heads {64, 128} x s_q {1, 2}, top-k 2048, context
32768 tokens per request, FP8 KV. With --per-query-indices-sq2 (on by default) the s_q = 2 shapes are
timed a second time with independent top-k indices per query position (what DSA does for MTP tokens).

KV pool (the same bytes as ours, kernels/kv_layout.h): 656-byte rows = 512 e4m3 latent values, 4 fp32
scales (one per 128 values), 64 bf16 rope values; pool slot = page * 64 + offset, the k_cache tensor
is (num_pages, 64, 1, 656) float8_e4m3fn. Request b owns slots [b * context, (b + 1) * context).
Values: latent ~ N(0, 1) quantized with our rule (scale = amax / 448 per group of 128, fp32; with
--pow2-scales the scale is rounded up to a power of two, as FlashMLA's own test does: its kernel
rounds each scale to bf16, exact only for powers of two), rope ~ N(0, 1) bf16, q ~ N(0, 1) bf16.
Indices: distinct random slots of the request (torch.rand(...).topk), int32 [B, s_q, topk]; every
4th request (b % 4 == 3) ends with min((b % 7 + 1) * 16, topk / 2) entries of -1 (invalid; masked).
By default the s_q query rows of a request share one index row (our kernel's contract,
kernels/mla_decode.h); FlashMLA's API takes one row per query position, so the row is repeated.

Checks before timing: the output is finite, and for requests 0 and B-1 (every s_q) out matches an
fp32 torch reference (gather, dequantize, softmax(q K^T * d^-0.5) V) to max|out - ref| <=
3e-2 * max|ref| (bf16 output and bf16 P . V in the kernel). A failed check marks the record
("check": "FAIL ...") and the script exits 1 after timing everything.

Timing: warm-up, then per rep: write a 256 MiB buffer (flushes the 50 MiB L2), keep the GPU busy
for ~50 us (torch.cuda._sleep, so the host launch of the kernels is hidden), record a CUDA event,
call flash_mla_with_kvcache (its split-K kernel + combine kernel; the scheduling metadata is
computed at the first call and reused, as FlashMLA intends), record an event. Median over --reps.

Byte / FLOP model (per call):
  bytes = U * 656                      unique KV rows read (U = B * topk shared, B * s_q * topk per-query)
        + B * s_q * topk * 4           indices (FlashMLA reads one index row per query position)
        + B * s_q * H * 576 * 2        q, bf16
        + B * s_q * H * (512 * 2 + 4)  out bf16 + lse fp32
  (split-K partials o_accum/lse_accum are not counted: they are not bytes the problem must move;
  invalid (-1) entries are counted as rows read: FlashMLA still loads a row for them.)
  flops = 2 * B * s_q * H * topk * (576 + 512)   (QK^T over 576 dims, P V over 512)
  roofline_fraction = max(bytes / 4.26 TB/s, flops / 790 TFLOP/s) / median time
(the peaks are the issue's H200 numbers; --peak-gbps / --peak-tflops override them, e.g. with the
ceilings `glm5prof bench kernels` measured in the same run.)

Output: a table on stdout and OUT_JSON, a list of records
  {kernel: "flashmla_sparse_fp8", batch, heads, s_q, topk, context, median_us, bytes, flops, tflops,
   achieved_gbps, roofline_fraction, ...extra fields: indices, min_us, p90_us, reps, kv_bytes,
   tflops_fraction, bandwidth_fraction, peak_tflops, peak_gbps, check, max_rel_err, device, torch,
   flashmla}.
Exit status: 0 all ok, 1 a check failed or a shape raised, 2 FlashMLA / CUDA not importable.
"""
import argparse
import json
import os
import statistics
import sys
import time

LATENT = 512
ROPE = 64
GROUP = 128
ROW_BYTES = LATENT + 4 * (LATENT // GROUP) + 2 * ROPE  # 656
PAGE = 64
E4M3_MAX = 448.0


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_json", help="path of the JSON list of records to write")
    ap.add_argument("--batches", default="1,8,32,64,128")
    ap.add_argument("--heads", default="64,128")
    ap.add_argument("--sq", default="1,2")
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--context", type=int, default=32768)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--flush-mib", type=int, default=256)
    ap.add_argument("--peak-tflops", type=float, default=790.0)
    ap.add_argument("--peak-gbps", type=float, default=4260.0)
    ap.add_argument("--pow2-scales", action="store_true", help="power-of-two scales (FlashMLA's test)")
    ap.add_argument("--no-per-query-indices-sq2", dest="per_query_sq2", action="store_false",
                    help="skip timing s_q=2 with independent indices per query position")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--provenance", default="", help="FlashMLA PROVENANCE.txt (commits), copied into records")
    a = ap.parse_args()

    def ints(s, name):
        try:
            v = [int(x) for x in s.split(",") if x.strip()]
        except ValueError:
            sys.exit(f"flashmla_bench: --{name} '{s}' must be a comma-separated list of integers")
        if not v or min(v) < 1:
            sys.exit(f"flashmla_bench: --{name} '{s}' must list positive integers")
        return v

    a.batches, a.heads, a.sq = ints(a.batches, "batches"), ints(a.heads, "heads"), ints(a.sq, "sq")
    for h in a.heads:
        if h not in (64, 128):
            sys.exit(f"flashmla_bench: --heads {h}: FlashMLA's sparse decode supports 64 or 128 heads")
    if a.topk < 64 or a.topk % 64:
        sys.exit(f"flashmla_bench: --topk {a.topk} must be a positive multiple of 64")
    if a.context < a.topk or a.context % PAGE:
        sys.exit(f"flashmla_bench: --context {a.context} must be >= topk and a multiple of {PAGE}")
    if a.reps < 20:
        sys.exit(f"flashmla_bench: --reps {a.reps}: at least 20 reps are required")
    return a


def write_json(path, records):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path + ".part", "w") as f:
        json.dump(records, f, indent=1)
    os.replace(path + ".part", path)


def build_pool(torch, tokens, pow2, gen):
    """Returns the FP8 pool as a (tokens, 656) uint8 tensor on the GPU, filled in chunks."""
    pool = torch.empty(tokens, ROW_BYTES, dtype=torch.uint8, device="cuda")
    chunk = 1 << 19
    for t0 in range(0, tokens, chunk):
        n = min(chunk, tokens - t0)
        x = torch.randn(n, LATENT // GROUP, GROUP, device="cuda", generator=gen)
        amax = x.abs().amax(dim=-1)                       # [n, 4]
        scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
        if pow2:
            scale = torch.exp2(torch.ceil(torch.log2(scale)))
        q = (x / scale.unsqueeze(-1)).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
        rope = torch.randn(n, ROPE, device="cuda", generator=gen).to(torch.bfloat16)
        rows = pool[t0:t0 + n]
        rows[:, :LATENT] = q.reshape(n, LATENT).view(torch.uint8)
        rows[:, LATENT:LATENT + 16] = scale.float().contiguous().view(torch.uint8).reshape(n, 16)
        rows[:, LATENT + 16:] = rope.contiguous().view(torch.uint8).reshape(n, 2 * ROPE)
    return pool


def make_indices(torch, B, s_q, topk, context, per_query, gen):
    """int32 [B, s_q, topk]: distinct random slots of request b; some rows end in -1."""
    rows = B * (s_q if per_query else 1)
    r = torch.rand(rows, context, device="cuda", generator=gen)
    idx = r.topk(topk, dim=-1).indices.to(torch.int32)    # distinct offsets within the request
    req = torch.arange(B, device="cuda", dtype=torch.int32)
    if per_query:
        idx = idx.view(B, s_q, topk) + (req * context).view(B, 1, 1)
    else:
        idx = (idx.view(B, 1, topk) + (req * context).view(B, 1, 1)).expand(B, s_q, topk)
    idx = idx.contiguous()
    for b in range(B):
        if b % 4 == 3:
            idx[b, :, topk - min((b % 7 + 1) * 16, topk // 2):] = -1
    return idx


def reference(torch, q, pool, idx, b, s, sm_scale):
    """fp32 out [H, 512] for request b, query position s (invalid indices skipped)."""
    sel = idx[b, s]
    sel = sel[sel >= 0].long()
    rows = pool[sel]                                               # [n, 656] uint8
    lat = rows[:, :LATENT].contiguous().view(torch.float8_e4m3fn).float()
    scl = rows[:, LATENT:LATENT + 16].contiguous().view(torch.float32)   # [n, 4]
    lat = (lat.view(-1, LATENT // GROUP, GROUP) * scl.unsqueeze(-1)).view(-1, LATENT)
    rope = rows[:, LATENT + 16:].contiguous().view(torch.bfloat16).float()
    k = torch.cat([lat, rope], dim=1)                              # [n, 576]
    qs = q[b, s].float()                                           # [H, 576]
    p = torch.softmax((qs @ k.t()) * sm_scale, dim=-1)
    return p @ lat                                                 # [H, 512]


def main():
    a = parse_args()
    try:
        import torch
        import flash_mla
    except Exception as e:  # noqa: BLE001 - any import failure means: nothing to time
        print(f"flashmla_bench: cannot import torch / flash_mla: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("flashmla_bench: torch sees no CUDA device", file=sys.stderr)
        return 2
    prov = ""
    if a.provenance and os.path.exists(a.provenance):
        with open(a.provenance) as f:
            prov = f.readline().strip()
    dev = torch.cuda.get_device_name()
    print(f"device {dev}, torch {torch.__version__} (CUDA {torch.version.cuda}), FlashMLA: {prov or '?'}")

    gen = torch.Generator(device="cuda")
    gen.manual_seed(a.seed)
    t0 = time.time()
    tokens = max(a.batches) * a.context
    pool = build_pool(torch, tokens, a.pow2_scales, gen)
    k_cache = pool.view(torch.float8_e4m3fn).view(tokens // PAGE, PAGE, 1, ROW_BYTES)
    flush = torch.empty(a.flush_mib << 20, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    print(f"pool {tokens} tokens x {ROW_BYTES} B = {tokens * ROW_BYTES / 2**30:.2f} GiB built in "
          f"{time.time() - t0:.1f} s; L2 flush {a.flush_mib} MiB per rep")

    sleep_ok = hasattr(torch.cuda, "_sleep")
    sm_scale = (LATENT + ROPE) ** -0.5
    shapes = [(B, H, s, False) for H in a.heads for s in a.sq for B in a.batches]
    if a.per_query_sq2 and 2 in a.sq:
        shapes += [(B, H, 2, True) for H in a.heads for B in a.batches]

    records, failed = [], False
    hdr = (f"{'indices':>9} {'B':>4} {'H':>4} {'s_q':>3} {'median_us':>10} {'min_us':>8} {'TFLOP/s':>8} "
           f"{'%790':>6} {'GB/s':>7} {'%4.26T':>7} {'roofline':>8}  check")
    print(hdr)
    print("-" * len(hdr))
    for (B, H, s_q, per_query) in shapes:
        mode = "per_query" if per_query else "shared"
        try:
            q = torch.randn(B, s_q, H, LATENT + ROPE, device="cuda", generator=gen).to(torch.bfloat16)
            idx = make_indices(torch, B, s_q, a.topk, a.context, per_query, gen)
            meta, _ = flash_mla.get_mla_metadata()

            def call():
                return flash_mla.flash_mla_with_kvcache(q, k_cache, None, None, LATENT, meta,
                                                        softmax_scale=sm_scale, is_fp8_kvcache=True,
                                                        indices=idx)

            out, lse = call()
            torch.cuda.synchronize()
            check, max_rel = "ok", 0.0
            if not torch.isfinite(out.float()).all().item():
                check = "FAIL non-finite output"
            else:
                for b in sorted({0, B - 1}):
                    for s in range(s_q):
                        ref = reference(torch, q, pool, idx, b, s, sm_scale)
                        err = (out[b, s].float() - ref).abs().max().item()
                        rel = err / max(ref.abs().max().item(), 1e-6)
                        max_rel = max(max_rel, rel)
                if max_rel > 3e-2:
                    check = f"FAIL max|out-ref|/max|ref| = {max_rel:.3g} > 3e-2"
            for _ in range(a.warmup):
                call()
            torch.cuda.synchronize()
            times = []
            for _ in range(a.reps):
                flush.fill_(0x5A)
                if sleep_ok:
                    torch.cuda._sleep(100_000)   # ~50 us at ~2 GHz: the host enqueues while the GPU waits
                e0 = torch.cuda.Event(enable_timing=True)
                e1 = torch.cuda.Event(enable_timing=True)
                e0.record()
                call()
                e1.record()
                e1.synchronize()
                times.append(e0.elapsed_time(e1) * 1e3)   # ms -> us
        except Exception as e:  # noqa: BLE001 - one shape failing must not lose the others
            failed = True
            msg = f"ERROR {type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
            print(f"{mode:>9} {B:>4} {H:>4} {s_q:>3}  {msg}")
            records.append({"kernel": "flashmla_sparse_fp8", "batch": B, "heads": H, "s_q": s_q, "topk": a.topk,
                            "context": a.context, "indices": mode, "check": msg})
            write_json(a.out_json, records)
            try:
                torch.cuda.synchronize()
            except Exception as e2:  # noqa: BLE001 - a sticky CUDA error: later shapes cannot run
                print(f"CUDA context unusable after the error ({type(e2).__name__}); stopping")
                break
            continue
        failed |= check != "ok"
        med = statistics.median(times)
        times.sort()
        unique_rows = B * a.topk * (s_q if per_query else 1)
        kv_bytes = unique_rows * ROW_BYTES
        nbytes = kv_bytes + B * s_q * a.topk * 4 + B * s_q * H * (LATENT + ROPE) * 2 + B * s_q * H * (LATENT * 2 + 4)
        flops = 2.0 * B * s_q * H * a.topk * (LATENT + ROPE + LATENT)
        sec = med * 1e-6
        tflops = flops / sec / 1e12
        gbps = nbytes / sec / 1e9
        floor_s = max(nbytes / (a.peak_gbps * 1e9), flops / (a.peak_tflops * 1e12))
        rec = {
            "kernel": "flashmla_sparse_fp8", "batch": B, "heads": H, "s_q": s_q, "topk": a.topk,
            "context": a.context, "median_us": med, "bytes": nbytes, "flops": flops, "tflops": tflops,
            "achieved_gbps": gbps, "roofline_fraction": floor_s / sec,
            "indices": mode, "kv_bytes": kv_bytes, "min_us": times[0],
            "p90_us": times[min(len(times) - 1, int(0.9 * len(times)))], "reps": a.reps,
            "tflops_fraction": tflops / a.peak_tflops, "bandwidth_fraction": gbps / a.peak_gbps,
            "peak_tflops": a.peak_tflops, "peak_gbps": a.peak_gbps, "check": check, "max_rel_err": max_rel,
            "scales": "pow2" if a.pow2_scales else "amax/448", "l2_flush_mib": a.flush_mib,
            "device": dev, "torch": torch.__version__, "flashmla": prov,
        }
        records.append(rec)
        write_json(a.out_json, records)   # after every shape: a timeout keeps what was measured
        print(f"{mode:>9} {B:>4} {H:>4} {s_q:>3} {med:>10.1f} {times[0]:>8.1f} {tflops:>8.1f} "
              f"{100 * tflops / a.peak_tflops:>5.1f}% {gbps:>7.0f} {100 * gbps / a.peak_gbps:>6.1f}% "
              f"{100 * rec['roofline_fraction']:>7.1f}%  {check} (rel err {max_rel:.2g})")
        del q, idx, out, lse
    write_json(a.out_json, records)
    print(f"wrote {len(records)} records to {a.out_json}")
    for r in records:
        if r.get("batch") == 128 and r.get("heads") == 128 and r.get("s_q") == 2 and "tflops" in r:
            print(f"reference point: B128 H128 s_q2 top-k {a.topk}, {r['indices']} indices: {r['tflops']:.0f} TFLOP/s"
                  f" = {100 * r['tflops_fraction']:.1f}% of {a.peak_tflops:.0f} (DeepSeek reports 410 TFLOP/s on"
                  f" H800 with per-query indices, 41% of its 989 dense BF16 peak)")
    if not sleep_ok:
        print("note: torch.cuda._sleep missing: host launch time may be inside the timed interval")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
