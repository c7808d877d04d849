#!/usr/bin/env bash
# Session 17, call S17h: the batch-1 MoE combine computing the next layer's attn.norm (or the final norm) in the same
# launch (MoeExpertsParams::next_norm_weight, profile --moe-combine-norm on): one CTA per token of 384 threads, the
# combine's arithmetic then norm_dev::rmsnorm_vec_regs (the norm kernel's own code). Predicted: the norm's launch and
# its dependent round trips (~5 us per MoE layer in S13's op table, 395 us per step) minus a slower combine (one CTA
# instead of 24): -0.2 to -0.35 ms per batch-1 step.
#  tests: GpuMoeFp8 (out and the normed rows bitwise), GpuNorm / GpuAttnPrologue (the norm body was split),
#  GraphGpu.MoePairForms* (logits bitwise, attn.norm / final_norm kernel counts), engine_gpu_golden;
#  decode step batch 1, --moe-combine-norm on (A) / off (B), A B B A.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8 kernels_gpu_norm kernels_gpu_attn_prologue
#        engine_gpu_graph engine_gpu_golden (golden and configs in .device/shared/); run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s17i
timeout 100 $BIN/kernels_gpu_linear_fp8 --gtest_filter='GpuMoeFp8.*' > $W/gpu_moe_fp8.log 2>&1; echo "GpuMoeFp8 rc=$?"
timeout 60 $BIN/kernels_gpu_norm > $W/gpu_norm.log 2>&1; echo "kernels_gpu_norm rc=$?"
timeout 60 $BIN/kernels_gpu_attn_prologue > $W/gpu_prologue.log 2>&1; echo "kernels_gpu_attn_prologue rc=$?"
timeout 150 $BIN/engine_gpu_graph --gtest_filter='GraphGpu.MoePairForms*' > $W/gpu_graph_forms.log 2>&1; echo "GraphGpu.MoePairForms rc=$?"
timeout 100 $BIN/engine_gpu_golden > $W/gpu_golden.log 2>&1; echo "engine_gpu_golden rc=$?"
grep -hE "^\[  (PASSED|FAILED) |Failure|Expected|Which is" $W/*.log | head -16
OPS="moe.experts|attn.norm|final_norm|attn.qkv_a_proj"
r=0; for x in A B B A; do r=$((r + 1))
  if [ $x = A ]; then device_round_profile b1-$r-A 1 32768 "$OPS" --moe-combine-norm on; else device_round_profile b1-$r-B 1 32768 "$OPS" --moe-combine-norm off; fi
done
device_round_pack
