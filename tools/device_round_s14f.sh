#!/usr/bin/env bash
# Session 14, call S14f: attn.o_proj alone without PDL (--o-proj-pdl off) against the default and against S14d's join
# (j: a 393-KB prefetch on the side stream joined before o_proj), in rotated orders (S14e ran them in one fixed
# order, and the last variant of each group was always the fastest). Batch 8 and 32: three rounds; batch 128 (its
# o_proj is not on the tensor-core path): default against j, two rounds.
# Usage: tools/device_pack.sh build-lead glm5prof; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s14f
one() {  # TAG BATCH CONTEXT ARGS...
  local tag=$1 b=$2 ctx=$3; shift 3
  local d=$W/$tag; mkdir -p $d
  local pool=$(( b * ( (ctx + 2 + 3 + 1 + 2 + 2 + 63) / 64 ) * 64 )); (( pool < 495000 )) && pool=495000
  timeout 90 $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch $b --context $ctx --pool-tokens $pool \
    --weights-dtype fp8 --steps 2 --warmup 2 --untraced-steps 3 --graph "$@" --out $d > $d/log 2>&1
  local rc=$?
  echo "$tag rc=$rc untraced $(python3 -c "import json;r=json.load(open('$d/report.json'));print(round(r['runs'][0]['timing']['untraced_step_us']/1000,3))" 2>/dev/null) ms"
  grep -E "^\| (attn.o_proj|attn.v_unabsorb|moe.experts) \|" $d/report.md | head -3 | sed 's/^/    /'
  rm -f $d/trace.json
}
v() {  # VARIANT TAG BATCH CONTEXT
  case $1 in
    A) one $2-A $3 $4 --l2-prefetch-o-proj 0 ;;
    B) one $2-B $3 $4 --l2-prefetch-o-proj 0 --o-proj-pdl off ;;
    C) one $2-C $3 $4 --l2-prefetch-o-proj 0.004 --l2-prefetch-join on ;;
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
