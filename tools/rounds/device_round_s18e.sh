#!/usr/bin/env bash
# Session 18, call S18e: CUPTI buffers parsed after the traced steps (CuptiTracer::stash_buffer, the new default)
# against parsed on CUPTI's thread as they fill (GLM5_CUPTI_PARSE=during, the old behaviour), batch 1 eager.
# S18d: the traced eager batch-1 step was either ~+0.5% or +20..39% over the untraced one, per process, whatever
# CUPTI activity kinds were left out: a host-side contention, not a per-call cost. Predicted: "after" stays near 0%
# in every process. Ten processes each, alternating; then the CUPTI / graph GPU tests on this build.
# Ran on a build with the diagnostic GLM5_CUPTI_PARSE (and the deferred parsing) in src/profiler/cupti_tracer.cpp (uncommitted: measured,
# no effect on the bimodal overhead, removed; reports/2026-12-02-h200-decode-step.md, session 18).
# Usage: tools/device_pack.sh build-lead glm5prof profiler_gpu_cupti_tracer profiler_gpu_cupti_small_buffer
#        engine_gpu_graph cli_gpu_robustness engine_gpu_golden; .device/shared as in S18a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s18e
nproc; cat /sys/fs/cgroup/cpu.max 2>/dev/null; taskset -p $$ 2>/dev/null
run_variant() {  # tag parse batch graph-flag
  local d=$W/$1; mkdir -p "$d"
  GLM5_CUPTI_PARSE="$2" timeout 90 "$BIN/glm5prof" profile --model glm5 --kv-path fp8 --batch "$3" --context 32768 \
    --pool-tokens 495000 --weights-dtype fp8 --steps 3 --warmup 2 --untraced-steps 3 $4 --out "$d" > "$d/log" 2>&1
  echo "$1 parse=$2 rc=$? $(python3 - "$d/report.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["runs"][0]
except Exception as e:
    print("no report:", e); sys.exit()
t, tr = r["timing"], r["trace"]
print(f'untraced {t["untraced_step_us"]/1e3:.2f} ms traced {t["traced_step_us"]/1e3:.2f} ms overhead {t["overhead_pct"]:+.1f}%'
      f' | kernels {tr.get("kernels_recorded")} of {tr.get("kernels_launched")} complete {tr.get("complete")} dropped {tr.get("records_dropped")}')
PY
)"
  rm -f "$d/trace.json"
}
for i in 1 2 3 4 5 6 7 8 9 10; do
  if (( i % 2 )); then run_variant b1-$i-after after 1 ""; run_variant b1-$i-during during 1 "";
  else run_variant b1-$i-during during 1 ""; run_variant b1-$i-after after 1 ""; fi
done
run_variant b1-graph after 1 --graph
run_variant b8 after 8 ""
export GLM5_BINARY_DIR=$BIN
for t in profiler_gpu_cupti_tracer profiler_gpu_cupti_small_buffer engine_gpu_graph cli_gpu_robustness engine_gpu_golden; do
  timeout 120 $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$? $(grep -cE '^\[       OK' $W/$t.log) ok $(grep -cE '^\[  FAILED' $W/$t.log) failed"
done
grep -hE "Failure|Expected|Which is|^\[  FAILED" $W/*.log | head -20
device_round_pack
