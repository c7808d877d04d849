#!/usr/bin/env bash
# Session 13, call S13c: the mma.sync MLA kernel's lean prologue (load_q / issue_tile / dequant_tile without
# per-element division), old and new binaries side by side in one call:
#  1. kernels_gpu_mla_decode (every variant against the CPU twin) and engine_gpu_golden (logits against the HF
#     reference) on the new build;
#  2. mla_small_batch_probe, old then new (B 1, 2, 4; cold and warm);
#  3. Nsight Compute durations of the step's attn.mla kernels (B 1, 32K, FP8 weights, fp8 path), old then new;
#  4. the decode step at batch 1 (FP8 weights, graphs; the three KV paths), new, old, new.
# Usage: tools/device_pack.sh build-lead glm5prof glm5prof_old mla_small_batch_probe mla_small_batch_probe_old
#        kernels_gpu_mla_decode engine_gpu_golden; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13c
for t in kernels_gpu_mla_decode engine_gpu_golden; do
  timeout 200 $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$?"; grep -E "Failure|FAILED|PASSED" $W/$t.log | head -8
done
for v in _old ""; do echo "== probe$v"; timeout 120 $BIN/mla_small_batch_probe$v 2>&1 | tee $W/probe$v.txt | grep -E "variant|auto|h16  +32|h64  +16|wgmma  +32"; done
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for v in _old ""; do
  timeout 150 $NCU --nvtx --nvtx-include attn.mla/ --cache-control none --clock-control none --metrics gpu__time_duration.sum \
    -c 12 --csv --print-units base $BIN/glm5prof$v profile --model glm5 --kv-path fp8 --batch 1 --context 32768 \
    --weights-dtype fp8 --warmup 1 --untraced-steps 1 --steps 1 --out $W/ncu_prof$v > $W/ncu$v.csv 2>/dev/null
  echo "== ncu attn.mla$v rc=$?"
  python3 - "$W/ncu$v.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value")
d = collections.defaultdict(list)
for r in rows[1:]: d[r[ki].split("(")[0][-40:]].append(float(r[vi].replace(",", "")) / 1000)
for k, v in d.items(): print(f"{k:42s} n={len(v):2d} median {sorted(v)[len(v)//2]:7.2f} us  all {' '.join(f'{x:.1f}' for x in v)}")
PY
done
for v in "" _old ""; do
  echo "== step glm5prof$v"
  BATCHES=1 WEIGHTS=fp8 GRAPHS=1 timeout 200 tools/decode_step_bench.sh "$BIN/glm5prof$v" "$W/step$v" > "$W/step$v.txt" 2>&1
  python3 tools/decode_step_summary.py "$W/step$v/decode-step.json" 2>&1 | tail -n 5
  rm -rf "$W/step$v/runs"/*/trace.json
done
rm -rf $W/ncu_prof* 
device_round_pack
