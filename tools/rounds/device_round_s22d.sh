#!/usr/bin/env bash
# Session 22, call S22d. S22c's table ran every batch 3-6% slower than session 21's (batch 8 63.68 ms against S22b's
# 61.37 on the same code path; batch 128 at 8192 tokens 270.33 against S21f's 255.52) while the copy rate was the
# usual 4263-4268 GB/s. Is it the machine or the top-k change? Defaults (A) against --topk-gather off
# --topk-score-hist off (B, session 21's top-k) on one machine: batch 128 at 8192 tokens, batch 8 and batch 32 at 32768,
# A B B A each.
# Usage: tools/device_pack.sh build-lead glm5prof; .device/shared as in S22a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s22d
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv
OPS="attn.indexer.topk|attn.indexer.score|attn.mla|moe.experts"
for cfg in "128 8192" "8 32768" "32 32768"; do
  set -- $cfg; r=0
  for x in A B B A; do
    r=$((r + 1)); [ $x = A ] && a=on || a=off
    device_round_profile b$1-$r-$x $1 $2 "$OPS" --topk-gather $a --topk-score-hist $a
  done
done
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
device_round_pack
