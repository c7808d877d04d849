#!/usr/bin/env bash
# Session 21, call S21g: two existing tuning options re-measured on the final defaults (the absorption now runs beside
# the top-k, and the side stream is idle while the score kernel runs): (1) --topk-cluster 4 against the automatic 8
# (S18b, before the move: 4 blocks 1433 us per step against 1226); (2) --l2-prefetch-o-proj 0.2 against off (S14: no
# gain at 0.25-0.8 issued beside the absorption). 8 processes each, A B B A A B B A; batch 1, graphs, 32K.
# Usage: tools/device_pack.sh build-lead glm5prof; .device/shared as in S21a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s21g
device_round_ab "attn.indexer.topk|attn.q_absorb|attn.mla" "A B B A A B B A" "--topk-cluster 4" "--topk-cluster 0"
mkdir -p $W/cluster && mv $W/b1-* $W/cluster/
device_round_ab "attn.o_proj|attn.o_proj.l2_prefetch|attn.mla|attn.indexer.score" "A B B A A B B A" \
  "--l2-prefetch-o-proj 0.2" "--l2-prefetch-o-proj 0"
mkdir -p $W/prefetch && mv $W/b1-* $W/prefetch/
device_round_pack
