#!/usr/bin/env bash
# Session 13, call S13l: overlap on / off alternating at batch 8, 32 (context 32768) and 128 (8192), FP8 weights,
# graphs, fp8 path only: does the side stream help or hurt past batch 1 (S13k's batch 128 read 314.7 ms against
# S12k's 306.2 on another call)?
# Usage: tools/device_pack.sh build-lead glm5prof; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13l
for rep in 1 2; do
  for ov in on off; do
    for b in 8 32 128; do
      ctx=32768; [ $b = 128 ] && ctx=8192
      d=$W/b$b-$ov-$rep; mkdir -p $d
      pool=$(( b * ( (ctx + 2 + 3 + 1 + 2 + 2 + 63) / 64 ) * 64 )); (( pool < 495000 )) && pool=495000
      timeout 90 $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch $b --context $ctx --pool-tokens $pool \
        --weights-dtype fp8 --steps 2 --warmup 2 --untraced-steps 3 --graph --overlap $ov --out $d > $d/log 2>&1
      echo "b$b $ov rep $rep rc=$? untraced $(python3 -c "import json;r=json.load(open('$d/report.json'));print(round(r['runs'][0]['timing']['untraced_step_us']/1000,2))" 2>/dev/null) ms"
      rm -f $d/trace.json
    done
  done
done
device_round_pack
