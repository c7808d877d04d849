#!/usr/bin/env bash
# Session 18, call S18d: what CUPTI tracing costs at batch 1 without CUDA graphs. S18c measured the traced step
# +25.0% over the untraced one (FP8 weights; BF16 +16.3%), against -0.3% with graphs and +0.9% at batch 8 eager:
# at batch 1 eager the host's launch loop (~1700 kernels in ~18 ms, ~10.6 us each; S18f) is the step's pace, so every
# per-API-call cost of the tracing lands on the step. Which part: each variant leaves one part out
# (GLM5_CUPTI_OFF, src/profiler/cupti_tracer.cpp): driver / runtime API records, NVTX marker records, the per-op
# NVTX ranges. Two rounds, the second in reverse order.
# Ran on a build with the diagnostic GLM5_CUPTI_OFF in src/profiler/cupti_tracer.cpp (uncommitted: measured,
# no effect on the bimodal overhead, removed; reports/2026-12-02-h200-decode-step.md, session 18).
# Usage: tools/device_pack.sh build-lead glm5prof; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s18d
variants=("" "driver" "marker" "nvtx_ops" "marker,nvtx_ops" "driver,marker,nvtx_ops" "runtime,driver")
run_variant() {  # tag off batch
  local d=$W/$1; mkdir -p "$d"
  GLM5_CUPTI_OFF="$2" timeout 90 "$BIN/glm5prof" profile --model glm5 --kv-path fp8 --batch "$3" --context 32768 \
    --pool-tokens 495000 --weights-dtype fp8 --steps 3 --warmup 2 --untraced-steps 3 --out "$d" > "$d/log" 2>&1
  echo "$1 off='$2' rc=$? $(python3 - "$d/report.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["runs"][0]
except Exception as e:
    print("no report:", e); sys.exit()
t, tr = r["timing"], r["trace"]
print(f'untraced {t["untraced_step_us"]/1e3:.2f} ms traced {t["traced_step_us"]/1e3:.2f} ms overhead {t["overhead_pct"]:+.1f}%'
      f' | kernels recorded {tr.get("kernels_recorded")} of launched {tr.get("kernels_launched")} complete {tr.get("complete")}'
      f' | ops {len(r["ops"])} step median (trace) {r["steps"]["median_us"]/1e3:.2f}')
PY
)"
  rm -f "$d/trace.json"
}
i=0
for v in "${variants[@]}"; do i=$((i + 1)); run_variant r1-$i "$v" 1; done
for (( j=${#variants[@]}-1; j>=0; j-- )); do run_variant r2-$((j + 1)) "${variants[$j]}" 1; done
run_variant b8-base "" 8
run_variant b8-off "marker,nvtx_ops" 8
device_round_pack
