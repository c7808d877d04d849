#!/usr/bin/env bash
# Historical: it ran on b2bea5e (S12c-S12e); `--fuse-norm` was removed again in 04e3b61, so it no longer runs as is.
# Session 12, device call S12c: the RMSNorm after a MoE layer fused into its combine (EngineOptions::fuse_next_norm).
# GPU tests (kernels_gpu_moe_grouped: the fused norm's bits; engine_gpu_fused_norm: engine logits on = off bit for bit;
# engine_gpu_fp8_weights), then the batch-1 decode step (FP8 weights, graphs) A/B in one call: --fuse-norm on, off, on.
#   tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_grouped engine_gpu_fused_norm engine_gpu_fp8_weights
#   run `bash tools/rounds/device_round_s12c.sh` with carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin ${1:-s12c}
for t in kernels_gpu_moe_grouped kernels_gpu_moe engine_gpu_fused_norm engine_gpu_fp8_weights; do
  filter=; [ $t = kernels_gpu_moe_grouped ] && filter=--gtest_filter=GpuMoeGrouped.PairDownMatchesPerTokenBitwise
  timeout 200 $BIN/$t $filter > $W/$t.log 2>&1; echo "$t rc=$?"
  grep -E "Failure|FAILED|PASSED|error" $W/$t.log | head -12
done
for run in on1 off on2; do
  fuse=${run%[0-9]}
  BATCHES=1 WEIGHTS=fp8 GRAPHS=1 EXTRA="--fuse-norm $fuse" timeout 150 tools/decode_step_bench.sh $BIN/glm5prof $W/step-$run > $W/step-$run.txt 2>&1
  echo "step $run rc=$?"; python3 tools/decode_step_summary.py $W/step-$run/decode-step.json 2>&1 | tail -3
  d=$W/step-$run/runs/b1-c32768-wfp8-graph1
  [ -f $d/report.md ] && sed -n '/## Run `fp8`/,/Per-layer/p' $d/report.md | grep -E "^\| (attn.norm|final_norm|moe.experts|mlp.norm) "
  rm -f $W/step-$run/runs/*/trace.json
done
device_round_pack
