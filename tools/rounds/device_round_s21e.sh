#!/usr/bin/env bash
# Session 21, call S21e (the A/Bs first written as call S21c, which never ran: no machine; with the final checks in the same call to spare a
# machine start):  --absorb-after-score on|off (EngineOptions::absorb_after_score: attn.q_absorb forked on the
# side stream after attn.indexer.score, so it runs beside the top-k's 8 blocks, not beside the score kernel; S21a's
# trace: score 13.8 us beside q_absorb's 256 blocks against 8.3-9.0 us alone; predicted -3 to -5 us per layer, -0.2 to
# -0.4 ms per batch-1 step). (2) --prologue-slim on|off (AttnPrologueParams::slim: the KV / indexer-key prologue's
# kernel at <= 32 registers, so its 2 blocks fit beside q_up's six 80-register GEMV blocks per SM and start when
# attn.qkv_a_proj ends, not ~11.5 us later; predicted up to -1.7 us per layer), with the absorption after the score on
# both sides. Tests first (bitwise: the engine with the absorption after the score, the slim prologue kernel); A/B at
# batch 1 (8 processes each, A B B A A B B A) and for (1) batch 8 (4 processes); one batch-1 trace with both on.
# (3) --moe-route-rank on|off (MoeRouteParams::rank_form: moe.route by ranks, one 256-thread block, not a warp's 8
# serial picks; S21a trace: moe.route ended 6.6 us after moe.router; predicted -1 to -2 us per layer), 8 processes,
# with the absorption after the score on both sides; its kernel test (the same ids and weight bits).
# (4) every GPU test executable (tools/device_tests.sh, 4 at a time; kernels_gpu_moe_grouped set aside, its MoE code
# unchanged since S18b); (5) issue 4's batch-1 FP8 rows with the three options on: BATCHES=1 WEIGHTS=fp8
# GRAPHS="1 0" EXTRA="--absorb-after-score on --prologue-slim on --moe-route-rank on" tools/decode_step_bench.sh.
# Usage: tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; .device/shared as in S21a;
#        run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s21e
timeout 300 $BIN/engine_gpu_graph --gtest_filter='GraphGpu.AbsorbAfterScore*:GraphGpu.SideStreamOpsMatchOneStream' > $W/graph.log 2>&1
echo "engine_gpu_graph AbsorbAfterScore/SideStream rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/graph.log | tr '\n' ' ')"
timeout 120 $BIN/kernels_gpu_attn_prologue > $W/prologue.log 2>&1
echo "kernels_gpu_attn_prologue rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/prologue.log | tr '\n' ' ')"
grep -hE "Failure|Expected|Which is|absorptions after" $W/graph.log $W/prologue.log | head -8
device_round_ab "attn.q_absorb|attn.indexer.score|attn.indexer.topk|attn.mla" "A B B A A B B A" \
  "--absorb-after-score on" "--absorb-after-score off"
mkdir -p $W/b1 && mv $W/b1-* $W/b1/
for x in A B B A; do
  r=$(( ${r:-0} + 1 )); [ $x = A ] && a=on || a=off
  device_round_profile b8-$r-$x 8 32768 "attn.q_absorb|attn.indexer.score|attn.indexer.topk|attn.mla" --absorb-after-score $a
done
mkdir -p $W/b8 && mv $W/b8-* $W/b8/
device_round_ab "attn.prologue|attn.q_up_proj|attn.indexer.score" "A B B A A B B A" \
  "--absorb-after-score on --prologue-slim on" "--absorb-after-score on --prologue-slim off"
mkdir -p $W/slim && mv $W/b1-* $W/slim/
device_round_ab "mlp.norm|moe.router|moe.route|moe.experts" "A B B A A B B A" \
  "--absorb-after-score on --moe-route-rank on" "--absorb-after-score on --moe-route-rank off"
mkdir -p $W/rank && mv $W/b1-* $W/rank/
timeout 200 $BIN/kernels_gpu_moe --gtest_filter='GpuMoe.Route*' > $W/moe.log 2>&1
echo "kernels_gpu_moe Route* rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/moe.log | tr '\n' ' ')"
grep -hE "Failure|Expected|Which is|rank form" $W/moe.log | head -6
device_round_trace trace-on --absorb-after-score on --prologue-slim on --moe-route-rank on
device_round_gpu_tests
export EXTRA="--absorb-after-score on --prologue-slim on --moe-route-rank on"
device_round_step 1 fp8 "1 0" 150 "attn.q_absorb|attn.prologue|attn.indexer.score|moe.route"
unset EXTRA
device_round_pack
