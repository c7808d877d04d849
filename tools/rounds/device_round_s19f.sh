#!/usr/bin/env bash
# Session 19, call S19f: the side stream at the highest stream priority (EngineOptions::side_priority, profile
# --side-priority). S19e's batch-1 trace with --gemv-fold on showed attn.indexer.weights_proj (side stream) waiting
# 16 us behind attn.q_up_proj's pending CTAs, the KV prologue after it and attn.indexer.score for both; predicted with
# priority: -3 to -5 us per layer with the fold on (-0.25 to -0.4 ms per step), ~0 with it off.
# (1) The batch-1 step (GLM-5, FP8 weights, fp8 path, graphs, 32K): fold x priority, four configurations in the order
# A B C D D C B A (A on/on, B on/off, C off/on, D off/off). (2) One trace kept (fold on, priority on).
# (3) The engine's GPU tests (bitwise tests across side-stream forms).
# Usage: tools/device_pack.sh build-lead glm5prof engine_gpu_graph engine_gpu_golden engine_gpu_fp8_weights
#        cli_gpu_robustness; .device/shared as in S19a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s19f
OPS="attn.qkv_a_proj|attn.q_up_proj|attn.indexer.weights_proj|attn.prologue|attn.indexer.score|moe.shared|moe.experts"
r=0
for x in A B C D D C B A; do
  r=$((r + 1))
  case $x in
    A) device_round_profile b1-$r-A 1 32768 "$OPS" --gemv-fold on --side-priority on ;;
    B) device_round_profile b1-$r-B 1 32768 "$OPS" --gemv-fold on --side-priority off ;;
    C) device_round_profile b1-$r-C 1 32768 "$OPS" --gemv-fold off --side-priority on ;;
    D) device_round_profile b1-$r-D 1 32768 "$OPS" --gemv-fold off --side-priority off ;;
  esac
done
device_round_trace b1-trace-A
device_round_gpu_tests
device_round_pack
