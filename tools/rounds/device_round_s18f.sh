#!/usr/bin/env bash
# Session 18, call S18f: the final build. (1) Every GPU test executable (tools/device_tests.sh, 4 at a time).
# (2) The new gpu_idle measure on real traces: the eager batch-1 step five times (S18d/e: a process's traced steps are
# either ~0.5% or 6-40% over the untraced ones; the slow ones should show the device idle between launches and the
# gpu_idle hotspot calling it launch-bound), batch 1 with graphs and eager batch 8 (neither should be flagged).
# Usage: tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; .device/shared as in S18a;
#        run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s18f
run_one() {  # tag batch extra-flags
  local d=$W/$1; mkdir -p "$d"
  timeout 90 "$BIN/glm5prof" profile --model glm5 --kv-path fp8 --batch "$2" --context 32768 --pool-tokens 495000 \
    --weights-dtype fp8 --steps 3 --warmup 2 --untraced-steps 3 $3 --out "$d" > "$d/log" 2>&1
  echo "$1 rc=$? $(python3 - "$d/report.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["runs"][0]
except Exception as e:
    print("no report:", e); sys.exit()
t = r["timing"]
idle = [h for h in r["hotspots"] if h["kind"] == "gpu_idle"]
print(f'untraced {t["untraced_step_us"]/1e3:.2f} ms traced {t["traced_step_us"]/1e3:.2f} ms ({t["overhead_pct"]:+.1f}%)'
      f' step (trace) {r["steps"]["median_us"]/1e3:.2f} ms idle {r["gpu_idle_us"]/1e3:.2f} ms per step,'
      f' {r["kernels_per_step"]:.0f} kernels per step | gpu_idle hotspot: {idle[0]["recommendation"][:260] if idle else "none"}')
PY
)"
  rm -f "$d/trace.json"
}
for i in 1 2 3 4 5; do run_one b1-eager-$i 1 ""; done
run_one b1-graph 1 --graph
run_one b8-eager 8 ""
device_round_gpu_tests
device_round_pack
