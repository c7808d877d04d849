#!/usr/bin/env bash
# Session 18, call S18a: the DSA indexer's top-k as one cluster of 16 blocks (non-portable cluster size) at batch 1.
# Why: at batch 1 / 32K the top-k is the largest latency-bound op of a layer (~15.6 us); its per-SM phases (the pass-0
# histogram's shared atomics, the candidate copy, the compaction: ~7.5 us of session 10's 16.2) scale with the
# positions a block holds, which 16 blocks halve. Predicted: -3 to -4 us per layer (-0.25 to -0.3 ms per step) at 32K,
# more at 128K; the cost: a 16-block cluster barrier and merge.
#  1. bench kernels --only indexer: topk at every cluster size (1..16) at batch 1, 32K and 128K, checked vs the CPU twin;
#  2. topk_probe: phases of block 0 per cluster size (0 = auto, 4, 8, 16), five score distributions, vs topk_cpu;
#  3. decode step batch 1 at 32768 (and one pair at 131072), --topk-cluster 0 (A) / 16 (B), A B B A;
#  4. every GPU test executable (kernels_gpu_indexer and kernels_gpu_topk_paths now run cluster 16 against the CPU).
# Usage: tools/device_pack.sh build-lead glm5prof topk_probe <every *_gpu_* executable>; copy ../shared/golden and
#        configs into .device/shared/; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s18a
t0=$(date +%s)
timeout 150 $BIN/glm5prof bench kernels --only indexer --out $W/indexer.json > $W/indexer.txt 2> $W/indexer.err
echo "bench rc=$? ($(( $(date +%s) - t0 )) s)"; tail -2 $W/indexer.err
python3 - $W/indexer.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    if r["kernel"] in ("topk", "indexer_score") and r.get("batch") in (1, 8):
        print(f'{r["kernel"]:14} B {r["batch"]:3} ctx {r["context"]:6} cl {r.get("splits", 0):2} {r["median_us"]:7.2f} us  {r["check"][-60:]}')
PY
timeout 60 $BIN/topk_probe > $W/topk_probe.txt 2>&1; echo "topk_probe rc=$?"
grep -E "^empty|^distribution|^n " $W/topk_probe.txt | head -70
OPS="attn.indexer.topk|attn.indexer.score|attn.mla"
r=0; for x in A B B A; do r=$((r + 1))
  if [ $x = A ]; then device_round_profile b1-$r-A 1 32768 "$OPS" --topk-cluster 0; else device_round_profile b1-$r-B 1 32768 "$OPS" --topk-cluster 16; fi
done
device_round_profile b1-128k-A 1 131072 "$OPS" --topk-cluster 0
device_round_profile b1-128k-B 1 131072 "$OPS" --topk-cluster 16
echo "elapsed before tests $(( $(date +%s) - t0 )) s"
device_round_gpu_tests
echo "elapsed $(( $(date +%s) - t0 )) s"
device_round_pack
