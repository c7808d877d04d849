#!/usr/bin/env bash
# Session 19, call S19c. (1) The batch-1 rows of issue 4's table on the final build (the folded input norms on by
# default: EngineOptions::gemv_norm; only batch 1 with FP8 weights runs the FP8 GEMV they fold into):
# `BATCHES=1 WEIGHTS=fp8 GRAPHS="1 0" tools/decode_step_bench.sh`. (2) Where the eager batch-1 tracing overhead comes
# from (S18: bimodal per process, +0.4..1.6% or +5.9..39.9%, host-bound, not what CUPTI records): the machine's CPU
# and NUMA layout and the GPU's CPU affinity, then the eager batch-1 step three times each: unpinned, pinned to the
# GPU's NUMA node's cores (taskset from nvidia-smi topo's "CPU Affinity"), pinned to two cores (4, 5).
# Usage: tools/device_pack.sh build-lead glm5prof; .device/shared as in S19a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s19c
device_round_step 1 fp8 "1 0" 300 "attn.norm|attn.q_a_norm|attn.qkv_a_proj|attn.q_up_proj|attn.rope"
echo "== CPU / NUMA"
nproc; lscpu | grep -E "^(Model name|Socket|Core|Thread|NUMA|CPU\(s\)|CPU max MHz|CPU MHz)" ; nvidia-smi topo -m 2>&1 | head -8
aff=$(nvidia-smi topo -m 2>/dev/null | awk '/^GPU0/ {for (i = 1; i <= NF; ++i) if ($i ~ /^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$/ && $i ~ /-/) {print $i; exit}}')
echo "GPU0 CPU affinity: ${aff:-unknown}"
run_one() {  # tag prefix...
  local tag=$1; shift
  local d=$W/$tag; mkdir -p "$d"
  "$@" timeout 90 "$BIN/glm5prof" profile --model glm5 --kv-path fp8 --batch 1 --context 32768 --pool-tokens 495000 \
    --weights-dtype fp8 --steps 3 --warmup 2 --untraced-steps 3 --out "$d" > "$d/log" 2>&1
  echo "$tag rc=$? $(python3 - "$d/report.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["runs"][0]
except Exception as e:
    print("no report:", e); sys.exit()
t = r["timing"]
print(f'untraced {t["untraced_step_us"]/1e3:.2f} ms traced {t["traced_step_us"]/1e3:.2f} ms ({t["overhead_pct"]:+.1f}%)'
      f' idle {r["gpu_idle_us"]/1e3:.2f} ms per step')
PY
)"
  rm -f "$d/trace.json"
}
for i in 1 2 3; do
  run_one eager-free-$i env
  if [ -n "$aff" ]; then run_one eager-node-$i taskset -c "$aff"; fi
  run_one eager-2cores-$i taskset -c 4,5
done
device_round_pack
