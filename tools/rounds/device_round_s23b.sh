#!/usr/bin/env bash
# Session 23, call S23b. S23a measured the first form of --indexer-first (the indexer's chain on the side stream, q_b and
# the absorption on the main stream): +0.7 ms at batch 1. Its trace: the side stream's prologue still started 7.4 us
# after qkv_a (q_b's CTAs, launched under qkv_a by PDL, held every SM), the indexer's wq_b took 15 us beside q_b, and
# attn.mla waited for the top-k. Second form (this call): the indexer's chain on the main stream (prologue, wq_b,
# score, top-k, each launched under its predecessor by PDL so their blocks are placed first), q_b and the absorption
# forked on the side stream, the main stream at the highest priority and the side at the lowest.
# Predicted: attn.mla starting ~5 us per layer earlier (-0.3 to -0.4 ms per step) if the score's blocks get placed
# before q_b's; no gain if the top-k's cluster waits for q_b's CTAs to drain.
# Usage: tools/device_pack.sh build-lead glm5prof engine_gpu_graph engine_gpu_golden; .device/shared holding
#        ../shared/golden and ../shared/configs; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s23b
device_round_test engine_gpu_graph 300 --gtest_filter='GraphGpu.IndexerFirst*'
OPS="attn.indexer.topk|attn.indexer.score|attn.indexer.wq_b|attn.q_up_proj|attn.q_absorb|attn.mla|attn.prologue"
device_round_ab "$OPS" "A B B A A B B A" "--indexer-first on" "--indexer-first off"
mkdir -p $W/b1 && mv $W/b1-* $W/b1/
r=0
for x in A B B A; do
  r=$((r + 1)); [ $x = A ] && a=on || a=off
  device_round_profile b8-$r-$x 8 32768 "$OPS" --indexer-first $a
done
mkdir -p $W/b8 && mv $W/b8-* $W/b8/
device_round_trace trace-first --indexer-first on
device_round_pack
