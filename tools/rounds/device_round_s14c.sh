#!/usr/bin/env bash
# Session 14, call S14c: S14b's Nsight Compute run showed attn.o_proj at batch 1 reading all 100.8 MB from DRAM
# with an L2 hit rate of 7% with or without the prefetch: the prefetched lines are gone by the time o_proj runs
# (the absorb / unabsorb weights, the MLA partials and the index keys stream ~40 MB through L2 in between).
# Here the prefetch inserts its lines with the evict_last priority, without and with a persisting L2 set-aside:
#   1. kernels_gpu_l2_prefetch, engine_gpu_graph;
#   2. Nsight Compute on batch 1 (eager): attn.o_proj's duration, DRAM bytes and L2 hit rate per variant;
#   3. batch 1 (graphs), the variants alternating, two rounds; batch 8 and 32 with the best guess.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_l2_prefetch engine_gpu_graph; run `bash THIS`,
# carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s14c
timeout 30 $BIN/kernels_gpu_l2_prefetch > $W/kernels_gpu_l2_prefetch.log 2>&1; echo "kernels_gpu_l2_prefetch rc=$?"
grep -E "Failure|FAILED|PASSED" $W/kernels_gpu_l2_prefetch.log | head -4
timeout 240 $BIN/engine_gpu_graph > $W/engine_gpu_graph.log 2>&1; echo "engine_gpu_graph rc=$?"
grep -E "Failure|FAILED|PASSED" $W/engine_gpu_graph.log | head -6
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
ncu_o_proj() {  # TAG ARGS...
  local tag=$1; shift
  timeout 150 $NCU --nvtx --nvtx-include attn.o_proj/ --cache-control none --clock-control none \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct --launch-skip 4 --launch-count 4 \
    --csv --print-units base $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch 1 --context 32768 \
    --weights-dtype fp8 --warmup 1 --untraced-steps 1 --steps 1 "$@" --out $W/ncu-$tag > $W/ncu-$tag.csv 2> $W/ncu-$tag.err
  echo "ncu $tag rc=$?"
  device_round_ncu_summary "$W/ncu-$tag.csv"
}
ncu_o_proj f0.4-el --l2-prefetch-o-proj 0.4 --l2-prefetch-evict-last on
ncu_o_proj f0.4-el-p30 --l2-prefetch-o-proj 0.4 --l2-prefetch-evict-last on --l2-persist-mib 30
ncu_o_proj f0.25-el-p30 --l2-prefetch-o-proj 0.25 --l2-prefetch-evict-last on --l2-persist-mib 30
# (--o-proj-pdl on: the default when this call ran; session 14 made off the default.)
one() { device_round_profile "$1" "$2" "$3" "attn.o_proj|attn.o_proj.l2_prefetch|attn.mla|attn.v_unabsorb" "${@:4}" --o-proj-pdl on; }
for rep in 1 2; do
  one b1-f0-r$rep 1 32768 --l2-prefetch-o-proj 0
  one b1-f0.4el-r$rep 1 32768 --l2-prefetch-o-proj 0.4 --l2-prefetch-evict-last on
  one b1-f0.4el-p30-r$rep 1 32768 --l2-prefetch-o-proj 0.4 --l2-prefetch-evict-last on --l2-persist-mib 30
  one b1-f0.25el-p30-r$rep 1 32768 --l2-prefetch-o-proj 0.25 --l2-prefetch-evict-last on --l2-persist-mib 30
  one b1-f0.6el-p30-r$rep 1 32768 --l2-prefetch-o-proj 0.6 --l2-prefetch-evict-last on --l2-persist-mib 30
done
for b in 8 32; do
  one b$b-f0 $b 32768 --l2-prefetch-o-proj 0
  one b$b-f0.4el-p30 $b 32768 --l2-prefetch-o-proj 0.4 --l2-prefetch-evict-last on --l2-persist-mib 30
done
device_round_pack
