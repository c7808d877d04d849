#!/usr/bin/env bash
# Session 14, call S14a: L2 prefetch of projection weights on the side stream (kernels/l2_prefetch.h,
# EngineOptions::o_proj_l2_prefetch / q_up_l2_prefetch). GPU tests, then the decode step (GLM-5, FP8 weights,
# graphs, fp8 path, context 32768) alternating the fractions in one call: batch 1 over o_proj fractions
# 0 / 0.25 / 0.4 / 0.6 / 0.8 (two rounds), q_up fractions with o_proj 0.4, and batch 8 / 32 with o_proj 0 / 0.4.
# Prints each run's untraced step time and its attn.o_proj / attn.q_up_proj rows.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_l2_prefetch engine_gpu_graph; run `bash THIS`,
# carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s14a
timeout 30 $BIN/kernels_gpu_l2_prefetch > $W/kernels_gpu_l2_prefetch.log 2>&1; echo "kernels_gpu_l2_prefetch rc=$?"
grep -E "Failure|FAILED|PASSED|asked" $W/kernels_gpu_l2_prefetch.log | head -8
timeout 240 $BIN/engine_gpu_graph > $W/engine_gpu_graph.log 2>&1; echo "engine_gpu_graph rc=$?"
grep -E "Failure|FAILED|PASSED|side ops" $W/engine_gpu_graph.log | head -12
# (--o-proj-pdl on: the default when this call ran; session 14 made off the default.)
one() { device_round_profile "$1" "$2" 32768 "attn.o_proj|attn.q_up_proj|attn.o_proj.l2_prefetch|attn.q_up_proj.l2_prefetch|attn.mla|attn.indexer.topk|attn.qkv_a_proj" "${@:3}" --o-proj-pdl on; }
for rep in 1 2; do
  for f in 0 0.25 0.4 0.6 0.8; do one b1-o$f-r$rep 1 --l2-prefetch-o-proj $f --l2-prefetch-q-up 0; done
  for q in 0.3 0.6; do one b1-o0.4-q$q-r$rep 1 --l2-prefetch-o-proj 0.4 --l2-prefetch-q-up $q; done
done
for b in 8 32; do
  for f in 0 0.4; do one b$b-o$f $b --l2-prefetch-o-proj $f --l2-prefetch-q-up 0; done
done
device_round_pack
