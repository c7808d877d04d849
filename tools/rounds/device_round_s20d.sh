#!/usr/bin/env bash
# Session 20, call S20d: (1) the fused MoE gate again (profile --moe-gate-fused on|off) with the rank-form routing's
# comparisons as unrolled float4 broadcasts (S20c: the gate ended 12 us after attn.o_proj, the routing ~4 us of it);
# (2) --qkv-a-admit-at-exit on|off (LinearGroupParams::admit_next_at_exit on the folded attn.qkv_a_proj: q_up's CTAs
# scheduled at qkv_a's exit, so the side stream's KV / indexer-key prologue is not queued behind them; predicted
# -1.5 us per layer, ~-0.1 ms per step), with the gate off on both sides; (3) --score-early-keys on|off
# (IndexerScoreParams::fresh = 1: the score kernel's first key loads before its PDL wait) with the admission at exit on
# both sides. 8 processes for (1) and (2), 4 for (3), A B B A ...; tests first (the gate bitwise against the three
# launches, kernel and engine; the score kernel with fresh keys written just before it); one trace per new option.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_gate kernels_gpu_indexer engine_gpu_graph
#        engine_gpu_golden; .device/shared as in S19a;
#        run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s20d
timeout 120 $BIN/kernels_gpu_moe_gate > $W/gate.log 2>&1
echo "kernels_gpu_moe_gate rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/gate.log | tr '\n' ' ')"
timeout 300 $BIN/engine_gpu_graph --gtest_filter='GraphGpu.MoeGate*:GraphGpu.GemvFold*' > $W/graph.log 2>&1
echo "engine_gpu_graph MoeGate/GemvFold rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/graph.log | tr '\n' ' ')"
timeout 200 $BIN/kernels_gpu_indexer --gtest_filter='GpuIndexer.Scores*' > $W/indexer.log 2>&1
echo "kernels_gpu_indexer Scores* rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/indexer.log | tr '\n' ' ')"
grep -h "fresh [12]" $W/indexer.log
export GLM5_BINARY_DIR=$BIN
timeout 200 $BIN/engine_gpu_golden > $W/golden.log 2>&1
echo "engine_gpu_golden rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/golden.log | tr '\n' ' ')"
grep -hE "Failure|Expected|Which is" $W/*.log | head -8
device_round_ab "moe.router|moe.route|mlp.norm" "A B B A" "--moe-gate-fused on" "--moe-gate-fused off"
mkdir -p $W/gate && mv $W/b1-* $W/gate/
device_round_ab "attn.qkv_a_proj|attn.q_up_proj|attn.indexer.score|attn.prologue" "A B B A A B B A" \
  "--moe-gate-fused off --qkv-a-admit-at-exit on" "--moe-gate-fused off --qkv-a-admit-at-exit off"
mkdir -p $W/admit && mv $W/b1-* $W/admit/
device_round_ab "attn.indexer.score|attn.indexer.topk" "A B B A" \
  "--moe-gate-fused off --qkv-a-admit-at-exit on --score-early-keys on" "--moe-gate-fused off --qkv-a-admit-at-exit on --score-early-keys off"
mkdir -p $W/early && mv $W/b1-* $W/early/
device_round_trace trace-gate --moe-gate-fused on
device_round_trace trace-admit --moe-gate-fused off --qkv-a-admit-at-exit on --score-early-keys on
device_round_pack
