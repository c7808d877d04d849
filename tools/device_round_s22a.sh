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
# Usage: tools/device_pack.sh build-lead glm5prof topk_probe kernels_gpu_topk_paths kernels_gpu_indexer
#        kernels_gpu_mla_decode engine_gpu_graph engine_gpu_golden; .device/shared holding ../shared/golden and
#        ../shared/configs; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s22a
run_test() {  # NAME TIMEOUT [gtest args]
  local t=$1 to=$2; shift 2
  timeout "$to" $BIN/$t "$@" > $W/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/$t.log | tr '\n' ' ')"
  grep -hE "Failure|Expected|Which is|gather " $W/$t.log | head -6
}
run_test kernels_gpu_topk_paths 200
run_test kernels_gpu_mla_decode 200 --gtest_filter='GpuMlaDecodeSplit.*:GpuMlaDecode/*'
timeout 200 $BIN/topk_probe > $W/topk_probe.txt 2>&1; echo "topk_probe rc=$?"
grep -A1 -E "^n  32768" $W/topk_probe.txt | head -40
device_round_ab "attn.indexer.topk|attn.indexer.score|attn.mla" "A B B A A B B A" "--topk-gather on" "--topk-gather off"
mkdir -p $W/b1 && mv $W/b1-* $W/b1/
for x in A B B A; do
  r=$(( ${r:-0} + 1 )); [ $x = A ] && a=on || a=off
  device_round_profile b8-$r-$x 8 32768 "attn.indexer.topk|attn.indexer.score" --topk-gather $a
done
mkdir -p $W/b8 && mv $W/b8-* $W/b8/
device_round_trace trace-default
run_test kernels_gpu_indexer 150
run_test engine_gpu_graph 300
run_test engine_gpu_golden 200
device_round_pack
