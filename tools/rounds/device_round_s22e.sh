#!/usr/bin/env bash
# Session 22, call S22e: issue 4's FP8-weight table again on another machine (S22c's ran every batch 3-6% slower than
# S22b / S22d measured the same code; S22d's A/B showed no regression from the top-k change at batch 8 / 32 / 128).
# BATCHES="1 8 32 128" WEIGHTS=fp8 GRAPHS="1 0" tools/decode_step_bench.sh.
# Usage: tools/device_pack.sh build-lead glm5prof; .device/shared as in S22a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s22e
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv,noheader
device_round_step "1 8 32 128" fp8 "1 0" 330 "attn.indexer.score|attn.indexer.topk"
device_round_pack
