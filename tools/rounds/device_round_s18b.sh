#!/usr/bin/env bash
# Session 18, call S18b: the DSA indexer's top-k with 4 positions per thread per step when a block holds <= 4096
# positions (TopkParams::per_thread auto; before: always 8).
# Why (S18a, topk_probe): at batch 1 / 32K each of the 8 blocks holds 4096 positions, so with 8 per thread half the
# threads held none and the others walked 8 keys serially through the pass-0 histogram (2.0 us), the candidate copy
# (1.7) and the compaction (2.3); a cluster of 16 blocks was slower (23.3 vs 17.4 us chained: its 16 SMs are scheduled
# later and merge slower). Predicted: those phases roughly halve, -2 to -3 us per layer (-0.15 to -0.25 ms per step).
#  1. kernels_gpu_indexer (every cluster size x both widths vs the CPU twin), kernels_gpu_topk_paths (both widths
#     forced at 131072 / 204800), engine_gpu_graph, engine_gpu_golden;
#  2. bench kernels --only indexer (topk per cluster size and width at batch 1), topk_probe (phases);
#  3. decode step batch 1 / 32768: --topk-per-thread 8 (A, the old kernel), auto (B, the new default: 4 here),
#     --topk-cluster 4 (C: 8192 positions per block, width 8), A B C C B A;
#  4. kernels_gpu_moe_grouped's PairDownMatchesPerTokenBitwise alone (not run in S18a).
# Ran on a build of 21b0290's parent with TopkParams::per_thread / profile --topk-per-thread added (uncommitted: the
# width was measured, then not kept, and removed before 21b0290; kernels/indexer.cu's topk_cuda comment has the numbers).
# Usage: tools/device_pack.sh build-lead glm5prof topk_probe kernels_gpu_indexer kernels_gpu_topk_paths engine_gpu_graph
#        engine_gpu_golden kernels_gpu_moe_grouped; .device/shared as in S18a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s18b
t0=$(date +%s)
export GLM5_BINARY_DIR=$BIN
for t in kernels_gpu_indexer kernels_gpu_topk_paths engine_gpu_graph engine_gpu_golden; do
  timeout 150 $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$? $(grep -cE '^\[       OK' $W/$t.log) ok $(grep -cE '^\[  FAILED' $W/$t.log) failed"
done
grep -hE "Failure|Expected|Which is|^\[  FAILED" $W/*.log | head -20
timeout 150 $BIN/glm5prof bench kernels --only indexer --out $W/indexer.json > $W/indexer.txt 2> $W/indexer.err
echo "bench rc=$? ($(( $(date +%s) - t0 )) s)"; tail -1 $W/indexer.err
python3 - $W/indexer.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    if r["kernel"] in ("topk", "indexer_score") and r.get("batch") in (1, 8, 32, 128):
        print(f'{r["kernel"]:14} B {r["batch"]:3} ctx {r["context"]:6} cl {r.get("splits", 0):2} {r["median_us"]:7.2f} us  {r["check"][-62:]}')
PY
timeout 60 $BIN/topk_probe > $W/topk_probe.txt 2>&1; echo "topk_probe rc=$?"
grep -E "^empty|^n " -A1 $W/topk_probe.txt | grep -v "^--" | head -40
grep -c MISMATCH $W/topk_probe.txt
OPS="attn.indexer.topk|attn.indexer.score|attn.mla"
r=0; for x in A B C C B A; do r=$((r + 1))
  case $x in
    A) device_round_profile b1-$r-A 1 32768 "$OPS" --topk-per-thread 8 ;;
    B) device_round_profile b1-$r-B 1 32768 "$OPS" ;;
    C) device_round_profile b1-$r-C 1 32768 "$OPS" --topk-cluster 4 ;;
  esac
done
echo "elapsed $(( $(date +%s) - t0 )) s"
timeout 240 $BIN/kernels_gpu_moe_grouped --gtest_filter=GpuMoeGrouped.PairDownMatchesPerTokenBitwise > $W/moe_grouped.log 2>&1
echo "moe_grouped PairDown rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/moe_grouped.log | tr '\n' ' ') ($(( $(date +%s) - t0 )) s)"
device_round_pack
