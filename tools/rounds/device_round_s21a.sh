#!/usr/bin/env bash
# Session 21, call S21a: session 20's pending A/Bs and a new L2 prefetch rider, batch 1 (GLM-5, FP8 weights, `fp8`
# path, graphs, 32K). (1) --qkv-a-admit-at-exit on|off (8 processes, A B B A A B B A; predicted -1.5 us per layer,
# ~-0.1 ms per step); (2) --score-early-keys on|off with the admission at exit on both sides (4 processes); (3)
# --unabsorb-l2-prefetch on|off (MlaDecodeParams::l2_prefetch: attn.mla's combine CTAs ask L2 for W_UV, 16.8 MB,
# before their PDL wait; predicted -2 to -3 us per layer, ~-0.2 ms per step, if the lines survive the ~10 us of
# attn.mla), 4 processes; (4) Nsight Compute on the unabsorb GEMV of an eager step with and without the rider (its
# duration, DRAM bytes and L2 hit rate: does the prefetch land); (5) one trace with all three on. Tests first: the
# fused gate (kernel and engine, bitwise), the GEMV fold, the score kernel with fresh keys, the rider (bitwise), golden.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_gate kernels_gpu_indexer kernels_gpu_mla_decode
#        engine_gpu_graph engine_gpu_golden; mkdir -p .device/shared && cp -r ../shared/golden ../shared/configs
#        .device/shared/; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s21a
timeout 120 $BIN/kernels_gpu_moe_gate > $W/gate.log 2>&1
echo "kernels_gpu_moe_gate rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/gate.log | tr '\n' ' ')"
timeout 200 $BIN/kernels_gpu_mla_decode --gtest_filter='GpuMlaDecodeSplit.*' > $W/mla.log 2>&1
echo "kernels_gpu_mla_decode GpuMlaDecodeSplit.* rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/mla.log | tr '\n' ' ')"
timeout 300 $BIN/engine_gpu_graph --gtest_filter='GraphGpu.MoeGate*:GraphGpu.GemvFold*' > $W/graph.log 2>&1
echo "engine_gpu_graph MoeGate/GemvFold rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/graph.log | tr '\n' ' ')"
timeout 200 $BIN/kernels_gpu_indexer --gtest_filter='GpuIndexer.Scores*' > $W/indexer.log 2>&1
echo "kernels_gpu_indexer Scores* rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/indexer.log | tr '\n' ' ')"
export GLM5_BINARY_DIR=$BIN
timeout 200 $BIN/engine_gpu_golden > $W/golden.log 2>&1
echo "engine_gpu_golden rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/golden.log | tr '\n' ' ')"
grep -hE "Failure|Expected|Which is" $W/*.log | head -8
device_round_ab "attn.qkv_a_proj|attn.q_up_proj|attn.indexer.score|attn.prologue" "A B B A A B B A" \
  "--qkv-a-admit-at-exit on" "--qkv-a-admit-at-exit off"
mkdir -p $W/admit && mv $W/b1-* $W/admit/
device_round_ab "attn.indexer.score|attn.indexer.topk" "A B B A" \
  "--qkv-a-admit-at-exit on --score-early-keys on" "--qkv-a-admit-at-exit on --score-early-keys off"
mkdir -p $W/early && mv $W/b1-* $W/early/
device_round_ab "attn.mla|attn.v_unabsorb|attn.o_proj" "A B B A" "--unabsorb-l2-prefetch on" "--unabsorb-l2-prefetch off"
mkdir -p $W/rider && mv $W/b1-* $W/rider/
for x in on off; do
  timeout 150 ncu --csv --print-units base --cache-control none --clock-control none --kernel-name regex:mla_unabsorb_gemv \
    --launch-skip 20 --launch-count 6 --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct \
    $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch 1 --context 32768 --pool-tokens 495000 --weights-dtype fp8 \
    --steps 1 --warmup 1 --untraced-steps 1 --unabsorb-l2-prefetch $x --out $W/ncu-$x > $W/ncu-$x.csv 2> $W/ncu-$x.err
  echo "ncu unabsorb, rider $x: rc=$?"; device_round_ncu_summary $W/ncu-$x.csv
done
device_round_trace trace-all --qkv-a-admit-at-exit on --score-early-keys on --unabsorb-l2-prefetch on
device_round_pack
