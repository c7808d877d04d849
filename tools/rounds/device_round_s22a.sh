#!/usr/bin/env bash
# Session 22, call S22a. (1) The review mend of session 21 (the combine kernel back to 40 registers: one instance per
# L2-rider form), never run on the GPU: GpuMlaDecodeSplit.* (the rider's three forms) and GpuMlaDecode/*.
# (2) TopkParams::gather (`--topk-gather on|off`): after the first radix pass, the top digit's keys are gathered into
# rank 0 of the request's cluster, which resolves passes 2 and 3 alone with block barriers and sends each block its
# compaction counts: two cluster barriers instead of five, no merge through distributed shared memory for those
# passes, no exit barrier. Predicted (S18 topk_probe phases at B 1 / 32K, C 8: p1 2.5 + p2 2.4 + counts 0.8 + csync
# 0.5 + exit 1.1 us replaced by ~0.8 send + 0.5 + ~1.8 rank 0 + 0.5): -3 to -5 us per layer, -0.2 to -0.4 ms per
# batch-1 step. Tests first (kernels_gpu_topk_paths: both forms against the CPU twin, the gathered form at its
# 16,384-key capacity and one past it), the probe's phases, then A/B at batch 1 (8 processes, A B B A A B B A) and
# batch 8 (4), one trace of the defaults; then engine_gpu_graph / engine_gpu_golden on the new default.
# (3) TopkParams::top_hist / IndexerScoreParams::top_hist (`--topk-score-hist on|off`): the score kernel builds the
# histogram of its scores' first radix digits (warp-aggregated atomics), the top-k reads it instead of its own pass 0
# and merge (S18 probe: p0.hist 2.0 + p0.merge 1.3 us at B 1 / 32K). Predicted a further -2 to -3 us per layer.
# A/B (2) with (3) off on both sides, then (3) with (2) on on both sides; batch 8 both on against both off.
# Usage: tools/device_pack.sh build-lead glm5prof topk_probe kernels_gpu_topk_paths kernels_gpu_indexer
#        kernels_gpu_mla_decode engine_gpu_graph engine_gpu_golden; .device/shared holding ../shared/golden and
#        ../shared/configs; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s22a
device_round_test kernels_gpu_topk_paths 150; a=$?
device_round_test kernels_gpu_indexer 150; b=$?
if [ $a != 0 ] || [ $b != 0 ]; then echo "top-k / indexer tests failed: no step runs"; device_round_pack; exit 0; fi
device_round_test kernels_gpu_mla_decode 200 --gtest_filter='GpuMlaDecodeSplit.*:GpuMlaDecode/*'
timeout 200 $BIN/topk_probe > $W/topk_probe.txt 2>&1; echo "topk_probe rc=$?"
grep -A1 -E "^n  32768" $W/topk_probe.txt | head -40
OPS="attn.indexer.topk|attn.indexer.score|attn.mla"
device_round_ab "$OPS" "A B B A A B B A" "--topk-gather on --topk-score-hist off" "--topk-gather off --topk-score-hist off"
mkdir -p $W/gather && mv $W/b1-* $W/gather/
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
