#!/usr/bin/env bash
# Session 14, call S14b: why batch 1 gained little from the o_proj L2 prefetch in S14a (o_proj 31.7 -> 30.8 us per
# layer, the step +0.15..0.3 ms) while batch 8 gained 17.5 us per layer. After S14a the prefetch segment is no longer
# joined before attn.o_proj (that second dependency cost o_proj its PDL launch). Here:
#   1. engine_gpu_graph (the join change);
#   2. Nsight Compute on batch 1 (eager): attn.o_proj's duration, L2 hit rate and DRAM bytes, prefetch 0 / 0.4;
#   3. batch 1 (graphs) over fraction x period: 0, 0.4 (4096), 0.5 (8192: each CTA's split range half from L2),
#      0.5 (2048: whole 1024-byte warp steps alternate hit / miss), 0.25 (4096); two rounds;
#   4. batch 8, 32 (context 32768) and 128 (8192) at 0 / 0.4 / 0.6.
# Usage: tools/device_pack.sh build-lead glm5prof engine_gpu_graph; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s14b
timeout 240 $BIN/engine_gpu_graph > $W/engine_gpu_graph.log 2>&1; echo "engine_gpu_graph rc=$?"
grep -E "Failure|FAILED|PASSED|side ops" $W/engine_gpu_graph.log | head -12
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for f in 0 0.4; do
  timeout 150 $NCU --nvtx --nvtx-include attn.o_proj/ --cache-control none --clock-control none \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct --launch-skip 4 --launch-count 6 \
    --csv --print-units base $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch 1 --context 32768 \
    --weights-dtype fp8 --warmup 1 --untraced-steps 1 --steps 1 --l2-prefetch-o-proj $f --out $W/ncu$f \
    > $W/ncu$f.csv 2> $W/ncu$f.err
  echo "ncu prefetch $f rc=$?"; grep -E "pass|==PROF==" $W/ncu$f.err | head -3
  device_round_ncu_summary "$W/ncu$f.csv"
done
# (--o-proj-pdl on: the default when this call ran; session 14 made off the default.)
one() { device_round_profile "$1" "$2" "$3" "attn.o_proj|attn.o_proj.l2_prefetch|attn.mla|attn.v_unabsorb" "${@:4}" --o-proj-pdl on; }
for rep in 1 2; do
  one b1-f0-r$rep 1 32768 --l2-prefetch-o-proj 0
  one b1-f0.4-r$rep 1 32768 --l2-prefetch-o-proj 0.4
  one b1-f0.5p8192-r$rep 1 32768 --l2-prefetch-o-proj 0.5 --l2-prefetch-period 8192
  one b1-f0.5p2048-r$rep 1 32768 --l2-prefetch-o-proj 0.5 --l2-prefetch-period 2048
  one b1-f0.25-r$rep 1 32768 --l2-prefetch-o-proj 0.25
done
for b in 8 32 128; do
  ctx=32768; [ $b = 128 ] && ctx=8192
  for f in 0 0.4 0.6; do one b$b-f$f $b $ctx --l2-prefetch-o-proj $f; done
done
device_round_pack
