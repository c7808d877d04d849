#!/usr/bin/env bash
# Session 22, call S22b. After S22a (gathered top-k: probe -2 us per kernel at B 1 / 32K but only -0.4 us per layer in
# the step, its rank-0 phase 4.8 us; score-kernel histogram: top-k -2.9 us per layer, score +1.6): (1) rank 0's
# second pass replaced by one warp ranking the few candidates of the selected pass-1 digit (<= 32; else the histogram
# pass), its per-rank counts in one pass of shared atomics instead of one pass per rank; (2) the score kernel's
# histogram in kTopkHistCopies = 8 copies (warp index mod 8), so the hot bins' global atomics spread 8 ways.
# (3) the MLA split-K combine loads its first 4 partials per thread before warp 0 computes the split weights (it
# ran S = 32's 8 partials per thread after them, in its one-at-a-time tail loop), held to 40 registers.
# Predicted: rank-0 phase 4.8 -> ~2 us; score +1.6 -> ~+0.5 us per layer; attn.mla -0.5 to -1 us per layer. Tests first; the probe (now with an
# indexer-like distribution); A/B at batch 1 (8 processes): defaults against both off, then --topk-score-hist on|off;
# batch 8 (4): defaults against both off; one trace of the defaults; engine_gpu_graph and engine_gpu_golden.
# Usage: tools/device_pack.sh build-lead glm5prof topk_probe kernels_gpu_topk_paths kernels_gpu_indexer
#        kernels_gpu_mla_decode engine_gpu_graph engine_gpu_golden; .device/shared as in S22a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s22b
device_round_test kernels_gpu_topk_paths 150; a=$?
device_round_test kernels_gpu_indexer 150; b=$?
if [ $a != 0 ] || [ $b != 0 ]; then echo "top-k / indexer tests failed: no step runs"; device_round_pack; exit 0; fi
device_round_test kernels_gpu_mla_decode 200 --gtest_filter='GpuMlaDecodeSplit.*:GpuMlaDecode/*'
timeout 200 $BIN/topk_probe > $W/topk_probe.txt 2>&1; echo "topk_probe rc=$?"
grep -A1 -E "^n  32768  C [08]" $W/topk_probe.txt | grep -v "^--" | head -48
timeout 200 $BIN/glm5prof bench kernels --only indexer --out $W/indexer.json > $W/indexer.txt 2> $W/indexer.err
echo "bench indexer rc=$?"; tail -3 $W/indexer.err
python3 -c "
import json
for r in json.load(open('$W/indexer.json')):
    if r['kernel'] in ('topk', 'indexer_score', 'indexer_score_topk') and r['batch'] in (1, 8, 128) and r['context'] in (32768, 131072):
        print(r['kernel'], 'B', r['batch'], 'ctx', r['context'], round(r['median_us'], 2), 'us;', r.get('check', '').split('; ', 1)[-1][:70])
" 2>&1 | head -40
OPS="attn.indexer.topk|attn.indexer.score|attn.mla"
device_round_ab "$OPS" "A B B A A B B A" "--topk-gather on --topk-score-hist on" "--topk-gather off --topk-score-hist off"
mkdir -p $W/both && mv $W/b1-* $W/both/
device_round_ab "$OPS" "A B B A A B B A" "--topk-score-hist on" "--topk-score-hist off"
mkdir -p $W/hist && mv $W/b1-* $W/hist/
for x in A B B A; do
  r=$(( ${r:-0} + 1 )); [ $x = A ] && a=on || a=off
  device_round_profile b8-$r-$x 8 32768 "$OPS" --topk-gather $a --topk-score-hist $a
done
mkdir -p $W/b8 && mv $W/b8-* $W/b8/
device_round_trace trace-default
device_round_test engine_gpu_graph 300
device_round_test engine_gpu_golden 200
device_round_pack
