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
one() {  # TAG BATCH CONTEXT ARGS...
  local tag=$1 b=$2 ctx=$3; shift 3
  local d=$W/$tag; mkdir -p $d
  local pool=$(( b * ( (ctx + 2 + 3 + 1 + 2 + 2 + 63) / 64 ) * 64 )); (( pool < 495000 )) && pool=495000
  timeout 90 $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch $b --context $ctx --pool-tokens $pool \
    --weights-dtype fp8 --steps 2 --warmup 2 --untraced-steps 3 --graph "$@" --out $d > $d/log 2>&1
  local rc=$?
  echo "$tag rc=$rc untraced $(python3 -c "import json;r=json.load(open('$d/report.json'));print(round(r['runs'][0]['timing']['untraced_step_us']/1000,3))" 2>/dev/null) ms"
  grep -E "^\| (attn.o_proj|attn.o_proj.l2_prefetch|attn.mla|attn.v_unabsorb) \|" $d/report.md | head -4 | sed 's/^/    /'
  rm -f $d/trace.json
}
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
