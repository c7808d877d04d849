#!/usr/bin/env bash
# Session 14, call S14f: attn.o_proj alone without PDL (--o-proj-pdl off) against the default and against S14d's join
# (j: a 393-KB prefetch on the side stream joined before o_proj), in rotated orders (S14e ran them in one fixed
# order, and the last variant of each group was always the fastest). Batch 8 and 32: three rounds; batch 128 (its
# o_proj is not on the tensor-core path): default against j, two rounds.
# Usage: tools/device_pack.sh build-lead glm5prof; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s14f
one() { device_round_profile "$1" "$2" "$3" "attn.o_proj|attn.v_unabsorb|moe.experts" "${@:4}"; }
v() {  # VARIANT TAG BATCH CONTEXT
  case $1 in
    A) one $2-A $3 $4 --l2-prefetch-o-proj 0 --o-proj-pdl on ;;
    B) one $2-B $3 $4 --l2-prefetch-o-proj 0 --o-proj-pdl off ;;
    C) one $2-C $3 $4 --l2-prefetch-o-proj 0.004 --l2-prefetch-join on --o-proj-pdl on ;;
  esac
}
for b in 8 32; do
  r=0
  for order in "A B C" "B C A" "C A B"; do
    r=$((r + 1)); for x in $order; do v $x b$b-r$r $b 32768; done
  done
done
r=0
for order in "A C" "C A"; do r=$((r + 1)); for x in $order; do v $x b128-r$r 128 8192; done; done
device_round_pack
