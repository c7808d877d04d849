#!/usr/bin/env bash
# Session 20, call S20a: (1) MoeExpertsParams::shared_late_trigger (profile --moe-shared-late on|off): the side stream's
# shared-expert down kernel admitted only when its gate_up CTAs exit, so the routed experts' gate_up (1024 CTAs) finds
# free SM slots right after the routing; predicted -2 us per MoE layer (~-0.15 ms per batch-1 step; S19g trace: the
# routed gate_up started 2.7 us after moe.route ended, all 264 slots held by the shared expert's 128 gate_up and 136 of
# its 192 early-admitted down CTAs). A/B in 8 processes, A B B A A B B A; the bitwise engine test of the pair forms.
# (2) One traced batch-1 step with the change (timeline). (3) Nsight Compute on ~3 layers of an eager batch-1 step,
# caches and clocks untouched: each kernel's own duration without PDL overlap, against its share of the chain.
# Usage: tools/device_pack.sh build-lead glm5prof engine_gpu_graph; .device/shared as in S19a; run `bash THIS`,
#        carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s20a
timeout 200 $BIN/engine_gpu_graph --gtest_filter='GraphGpu.MoePair*' > $W/gpu_graph_pair.log 2>&1
echo "GraphGpu.MoePair* rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/gpu_graph_pair.log | tr '\n' ' ')"
device_round_ab "moe.experts|moe.shared|moe.route" "A B B A A B B A" "--moe-shared-late on" "--moe-shared-late off"
device_round_trace b1-trace-A --moe-shared-late on
timeout 240 ncu --csv --print-units base --cache-control none --clock-control none --launch-skip 2400 --launch-count 64 \
  --metrics gpu__time_duration.sum,launch__grid_size,dram__bytes_read.sum,sm__cycles_active.avg \
  $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch 1 --context 32768 --pool-tokens 495000 --weights-dtype fp8 \
  --steps 1 --warmup 2 --untraced-steps 1 --out $W/ncu-run > $W/ncu.csv 2> $W/ncu.err
echo "ncu rc=$?"; tail -2 $W/ncu.err
python3 - $W/ncu.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index("Kernel Name"); mi = h.index("Metric Name"); vi = h.index("Metric Value"); ni = h.index("ID")
by = {}
for r in rows[1:]:
    by.setdefault(r[ni], {"name": r[ki]})[r[mi]] = float(r[vi].replace(',', ''))
for k, m in by.items():
    print(f'{k:>4} {m.get("gpu__time_duration.sum", 0)/1000:8.2f} us grid {m.get("launch__grid_size", 0):6.0f} '
          f'DRAM {m.get("dram__bytes_read.sum", 0)/1e6:8.2f} MB  {m["name"][:70]}')
PY
device_round_pack
