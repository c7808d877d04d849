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
one() {  # TAG BATCH CONTEXT ARGS...
  local tag=$1 b=$2 ctx=$3; shift 3
  local d=$W/$tag; mkdir -p $d
  local pool=$(( b * ( (ctx + 2 + 3 + 1 + 2 + 2 + 63) / 64 ) * 64 )); (( pool < 495000 )) && pool=495000
  timeout 90 $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch $b --context $ctx --pool-tokens $pool \
    --weights-dtype fp8 --steps 2 --warmup 2 --untraced-steps 3 --graph "$@" --out $d > $d/log 2>&1
  local rc=$?
  echo "$tag rc=$rc untraced $(python3 -c "import json;r=json.load(open('$d/report.json'));print(round(r['runs'][0]['timing']['untraced_step_us']/1000,3))" 2>/dev/null) ms"
  grep -E "^\| (attn.o_proj|attn.v_unabsorb|attn.q_up_proj|attn.qkv_a_proj|moe.experts|moe.shared) \|" $d/report.md | head -6 | sed 's/^/    /'
  rm -f $d/trace.json
}
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
