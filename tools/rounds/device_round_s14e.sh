#!/usr/bin/env bash
# Session 14, call S14e: S14d showed the batch-8 / 32 gain of S14a came from the join alone: attn.o_proj waiting for a
# side kernel (so launched without its programmatic (PDL) edge after attn.v_unabsorb) ran 17 us (batch 8) and 13 us
# (batch 32) per layer faster, with or without the prefetch. Is it PDL on the FP8 tensor-core linear in general?
# --mma-pdl off launches every linear_fp8_mma grid (batch 2..64: every FP8 projection) without the attribute.
# Variants alternating, two rounds: pdl on (the default), pdl off, and on + the S14d join (j0.004).
# Usage: tools/device_pack.sh build-lead glm5prof; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s14e
# (--o-proj-pdl on: the default when this call ran; session 14 made off the default.)
one() { device_round_profile "$1" "$2" "$3" "attn.o_proj|attn.v_unabsorb|attn.q_up_proj|attn.qkv_a_proj|moe.experts|moe.shared" "${@:4}" --o-proj-pdl on; }
for rep in 1 2; do
  for b in 8 32 128; do
    ctx=32768; [ $b = 128 ] && ctx=8192
    one b$b-on-r$rep $b $ctx --l2-prefetch-o-proj 0
    one b$b-off-r$rep $b $ctx --l2-prefetch-o-proj 0 --mma-pdl off
    one b$b-j-r$rep $b $ctx --l2-prefetch-o-proj 0.004 --l2-prefetch-join on
  done
done
one b1-on 1 32768 --l2-prefetch-o-proj 0
one b1-off 1 32768 --l2-prefetch-o-proj 0 --mma-pdl off
device_round_pack
