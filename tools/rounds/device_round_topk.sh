#!/usr/bin/env bash
# One device call checking and timing the DSA indexer's top-k (kernels/indexer.cu topk_kernel): kernels_gpu_indexer
# (every top-k against topk_cpu, exact), tools/probe/topk_probe.cu (per-phase cycles at B 1 on five score
# distributions), `glm5prof bench kernels --only indexer` and the decode step with the weights / batches in
# STEP_WEIGHTS / STEP_BATCHES (graphs on; default batch 1, FP8 weights).
# Calls made with it: S10e (session 10: the top-k's fixed cost). Results: reports/2026-11-30-h200-kv-kernels.md.
#   tools/device_pack.sh build-lead glm5prof kernels_gpu_indexer topk_probe; run `bash THIS TAG` with carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin "${1:-topk}"
timeout 120 $BIN/kernels_gpu_indexer > $W/indexer_test.log 2>&1
echo "indexer test rc=$?"; grep -E "Failure|FAILED|PASSED|OK \]" $W/indexer_test.log | head -20
timeout 120 $BIN/topk_probe > $W/topk_probe.txt 2>&1; echo "topk probe rc=$?"
python3 - $W/topk_probe.txt <<'PY'
import re, sys
for l in open(sys.argv[1]):
    l = l.rstrip()
    if l.startswith(("n ", "dist", "empty")): print(l)
    elif "phases" in l:
        d = dict(re.findall(r"(\S+) ([\d.]+)", l.split(":", 1)[1]))
        print("   own %.2f us: hist0 %s merges %s/%s/%s rest0 %s compact %s exit %s" % (float(d["total"]) - float(d["pdl"]),
              d["p0.hist"], d["p0.merge"], d["p1.merge"], d["p2.merge"], d["p0.rest"], d["compact"], d["exit"]))
PY
timeout 200 $BIN/glm5prof bench kernels --only indexer --reps ${REPS:-20} --out $W/indexer.json > $W/indexer.txt 2>&1
echo "indexer bench rc=$?"; grep -E "^  (topk|indexer|copy)" $W/indexer.txt | head -40
device_round_step "${STEP_BATCHES:-1}" "${STEP_WEIGHTS:-fp8}" 1 "${STEP_TIMEOUT:-200}" "indexer|attn\.|moe|mlp"
device_round_pack
