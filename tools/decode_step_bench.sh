#!/usr/bin/env bash
# Decode-step benchmark (issue 4): GLM-5 (synthetic weights, BF16 and FP8) on one GPU, batch 1, 8, 32, 128
# at context 32768, the three FP8 KV paths (one `profile --kv-path all` per run), CUDA graph off and on.
# Each run states its untraced step time (CUDA events, no CUPTI), its traced step time and the step's
# byte floor (report.json runs[].timing / runs[].floor). Writes OUT/decode-step.json: one record per
# (kv_path, batch, graph):
#   {kv_path, weights_dtype, batch, context, graph, step_us, floor_us, ratio, traced_step_us,
#    untraced_step_us, overhead_pct, kernel_span_us, pool_tokens, experts_per_moe_layer}
# step_us = the untraced step (what a server sees); ratio = step_us / floor_us. A configuration whose
# KV does not fit on the GPU (batch 128 x 32768 tokens x 78 layers needs ~258 GB) gets a record with
# "skipped" and the reason, then is run again at the largest of 16384 / 8192 / 4096 tokens that fits.
# OUT/runs/b<B>-c<C>-w<bf16|fp8>-graph<0|1>/ keeps each run's report.json / report.md / log (trace.json is deleted unless
# KEEP_TRACES=1). Environment: BATCHES (default "1 8 32 128"), WEIGHTS (default "bf16 fp8"), GRAPHS
# (default "0 1"), CONTEXT, STEPS=4 WARMUP=2 UNTRACED=3, SKIP ("b32-wbf16-graph0 ..." runs left out),
# EXTRA (more `profile` flags for every run, e.g. "--fp8-gemv tma").
#
# Usage: tools/decode_step_bench.sh BIN OUT     (BIN: the glm5prof executable)
set -u
BIN=${1:?usage: decode_step_bench.sh BIN OUT}
OUT=${2:?usage: decode_step_bench.sh BIN OUT}
STEPS=${STEPS:-4}
WARMUP=${WARMUP:-2}
UNTRACED=${UNTRACED:-3}
BATCHES=${BATCHES:-"1 8 32 128"}
CONTEXT=${CONTEXT:-32768}
WEIGHTS=${WEIGHTS:-"bf16 fp8"}
GRAPHS=${GRAPHS:-"0 1"}
SKIP=${SKIP:-}
MODEL=${MODEL:-glm5}
POOL_MIN=${POOL_MIN:-495000}  # an H100 (80 GB) holds ~280,000 tokens beside GLM-5's FP8 weights (session 28)
mkdir -p "$OUT/runs"
start=$(date +%s)

# Pool: every request's pages (context + warm-up + untraced + measured steps), at least the
# 495,000-token server pool the other GLM-5 reports use (POOL_MIN; the cast path casts the whole pool).
pool_for() {  # batch context
  # + 2: with --graph the default --graph-trace graph runs one re-capture and one attribution step more
  local need=$(( $1 * ( ($2 + WARMUP + UNTRACED + 1 + STEPS + 2 + 63) / 64 ) * 64 ))
  (( need < POOL_MIN )) && need=$POOL_MIN
  echo $need
}

run_one() {  # batch context weights graph(0|1) -> 0 ok, 2 did not fit, 1 other failure
  local b=$1 ctx=$2 wd=$3 g=$4 dir="$OUT/runs/b$1-c$2-w$3-graph$4"
  local pool; pool=$(pool_for "$b" "$ctx")
  local flag=""; [[ $g == 1 ]] && flag="--graph"
  mkdir -p "$dir"
  local t0; t0=$(date +%s)
  "$BIN" profile --model "$MODEL" --kv-path all --batch "$b" --context "$ctx" --pool-tokens "$pool" \
      --weights-dtype "$wd" --steps "$STEPS" --warmup "$WARMUP" --untraced-steps "$UNTRACED" $flag ${EXTRA:-} --out "$dir" \
      > "$dir/log" 2>&1
  local rc=$?
  echo "batch $b context $ctx weights $wd graph $g: exit $rc in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/bench.log"
  [[ ${KEEP_TRACES:-0} == 1 ]] || rm -f "$dir/trace.json"
  if [[ $rc -ne 0 && $rc -ne 3 ]]; then
    tail -n 3 "$dir/log" | tee -a "$OUT/bench.log"
    grep -q "does not fit\|cannot hold\|out of memory" "$dir/log" && return 2
    return 1
  fi
  return 0
}

for b in $BATCHES; do
  for wd in $WEIGHTS; do
    for g in $GRAPHS; do
      [[ " $SKIP " == *" b$b-w$wd-graph$g "* ]] && continue
      run_one "$b" "$CONTEXT" "$wd" "$g"
      rc=$?
      if [[ $rc == 2 ]]; then
        for ctx in 16384 8192 4096; do
          run_one "$b" "$ctx" "$wd" "$g" && break
        done
      fi
    done
  done
done

python3 - "$OUT" "$CONTEXT" <<'PY'
import json, os, sys, glob
out, want_ctx = sys.argv[1], int(sys.argv[2])
records = []
for d in sorted(glob.glob(os.path.join(out, "runs", "b*-c*-w*-graph*"))):
    name = os.path.basename(d)
    b, c, wd, g = name[1:].split("-")
    batch, ctx, wdtype, graph = int(b), int(c[1:]), wd[1:], g == "graph1"
    rj = os.path.join(d, "report.json")
    if not os.path.exists(rj):
        log = open(os.path.join(d, "log")).read().strip().splitlines() if os.path.exists(os.path.join(d, "log")) else []
        records.append({"kv_path": "all", "weights_dtype": wdtype, "batch": batch, "context": ctx, "graph": graph,
                        "skipped": log[-1] if log else "no report"})
        continue
    rep = json.load(open(rj))
    for run in rep.get("runs", []):
        t, f, spec = run.get("timing") or {}, run.get("floor") or {}, run.get("spec") or {}
        records.append({
            "kv_path": spec.get("kv_path", run.get("name")),
            "weights_dtype": f.get("weights_dtype", wdtype),
            "batch": batch, "context": ctx, "graph": graph,
            "step_us": f.get("step_us"),
            "floor_us": f.get("floor_us"),
            "ratio": f.get("ratio"),
            "traced_step_us": t.get("traced_step_us"),
            "untraced_step_us": t.get("untraced_step_us"),
            "overhead_pct": t.get("overhead_pct"),
            "kernel_span_us": (run.get("steps") or {}).get("median_us"),
            "pool_tokens": spec.get("pool_tokens"),
            "experts_per_moe_layer": f.get("experts_per_moe_layer"),
            "trace_complete": run.get("complete"),
            **({} if ctx == want_ctx else {"note": f"context {want_ctx} does not fit on the GPU at batch {batch}"}),
        })
with open(os.path.join(out, "decode-step.json"), "w") as fh:
    json.dump(records, fh, indent=1)
print(f"{len(records)} records -> {os.path.join(out, 'decode-step.json')}")
for r in records:
    if "skipped" in r:
        print(f"  {r['weights_dtype']} b{r['batch']:<4} c{r['context']:<6} graph={int(r['graph'])} skipped: {r['skipped'][:100]}")
    else:
        print(f"  {r['kv_path']:<11} {r['weights_dtype']:<4} b{r['batch']:<4} c{r['context']:<6} graph={int(r['graph'])} step {r['step_us'] or 0:9.1f} us"
              f" floor {r['floor_us'] or 0:8.1f} us ratio {r['ratio'] or 0:5.2f} traced {r['traced_step_us'] or 0:9.1f}"
              f" overhead {r['overhead_pct'] if r['overhead_pct'] is not None else float('nan'):+.2f}%")
PY
echo "total $(( $(date +%s) - start )) s" | tee -a "$OUT/bench.log"
