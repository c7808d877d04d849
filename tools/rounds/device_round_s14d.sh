#!/usr/bin/env bash
# Session 14, call S14d: is S14a's batch-8 gain (o_proj 54.8 -> 37.3 us per layer, the step -1.55 ms) real, and is it
# the prefetch or the join? In S14a the prefetch segment was joined before attn.o_proj; S14b / S14c (no join) showed
# no o_proj gain at batch 8 with normal-priority lines. Variants (graphs, fp8 path, FP8 weights), alternating:
#   f0: no prefetch; j0.4: fraction 0.4 joined before o_proj; n0.4: 0.4 not joined; j0.004: a 16-byte-per-period
#   prefetch (393 KB) joined: the join's effect alone (o_proj waits for a side kernel, no PDL launch).
# Usage: tools/device_pack.sh build-lead glm5prof; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s14d
# (--o-proj-pdl on: the default when this call ran; session 14 made off the default.)
one() { device_round_profile "$1" "$2" "$3" "attn.o_proj|attn.o_proj.l2_prefetch|attn.mla|attn.v_unabsorb" "${@:4}" --o-proj-pdl on; }
for rep in 1 2; do
  for b in 8 32 1; do
    one b$b-f0-r$rep $b 32768 --l2-prefetch-o-proj 0
    one b$b-j0.4-r$rep $b 32768 --l2-prefetch-o-proj 0.4 --l2-prefetch-join on
    one b$b-j0.004-r$rep $b 32768 --l2-prefetch-o-proj 0.004 --l2-prefetch-join on
    [ $b = 8 ] && one b$b-n0.4-r$rep $b 32768 --l2-prefetch-o-proj 0.4
  done
done
one b128-f0 128 8192 --l2-prefetch-o-proj 0
one b128-j0.4 128 8192 --l2-prefetch-o-proj 0.4 --l2-prefetch-join on
device_round_pack
