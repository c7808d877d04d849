#!/usr/bin/env bash
# Session 23, call S23a. EngineOptions::indexer_first (--indexer-first on|off): at batch 1 the DSA indexer's wq_b runs
# as its own folded GEMV on the side stream right after the prologue, then the score and the top-k there, while the
# main stream runs q_b alone and the absorption. Before, the score waited for the whole q_up group (15-19 us) and the
# chain score 7.6 + top-k 13 us ran with HBM nearly idle (S22b trace). Predicted: -5 to -10 us per layer (-0.4 to
# -0.8 ms per step) if the indexer's chain overlaps q_b's stream; less if the top-k's cluster waits for q_b's CTAs.
# Tests first (the new GraphGpu.IndexerFirstIsBitwiseAndOnTheSideStream, the golden checkpoint with the option);
# A/B at batch 1 (8 processes), batch 8 (4), one trace each way.
# Usage: tools/device_pack.sh build-lead glm5prof engine_gpu_graph engine_gpu_golden; .device/shared holding
#        ../shared/golden and ../shared/configs; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s23a
device_round_test engine_gpu_graph 300 --gtest_filter='GraphGpu.IndexerFirst*:GraphGpu.GemvFold*:GraphGpu.AbsorbAfter*'
OPS="attn.indexer.topk|attn.indexer.score|attn.indexer.wq_b|attn.q_up_proj|attn.q_absorb|attn.mla"
device_round_ab "$OPS" "A B B A A B B A" "--indexer-first on" "--indexer-first off"
mkdir -p $W/b1 && mv $W/b1-* $W/b1/
r=0
for x in A B B A; do
  r=$((r + 1)); [ $x = A ] && a=on || a=off
  device_round_profile b8-$r-$x 8 32768 "$OPS" --indexer-first $a
done
mkdir -p $W/b8 && mv $W/b8-* $W/b8/
device_round_trace trace-first --indexer-first on
device_round_trace trace-grouped --indexer-first off
device_round_pack
