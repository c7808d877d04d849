#!/usr/bin/env bash
# Session 14, call S14h: batch 128's FP8 projections. S14g's op table at batch 128 (context 8192) has every FP8
# projection above the tensor-core range (m > 64) on the dequantize + BF16 cuBLASLt path at 6-10% of copy: ~58.6 ms of
# the 317-ms step (attn.o_proj alone 26.4 ms, 339 us per layer against ~25 us of bytes). Variants, rotated, two rounds:
#   A: default (dequant); B: --fp8-large-m block-scaled (cuBLASLt's FP8 GEMM, x quantized per token and 128 columns);
#   C: --fp8-mma-max-m 128 (our tensor-core kernel, two 64-token tiles). Batch 32: A against block-scaled below the
#   tensor-core kernel (--fp8-mma-max-m 16). First kernels_gpu_linear_fp8 (the tensor-core kernel at m = 65 and 128).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s14h
timeout 200 $BIN/kernels_gpu_linear_fp8 > $W/kernels_gpu_linear_fp8.log 2>&1; echo "kernels_gpu_linear_fp8 rc=$?"
grep -E "Failure|FAILED|PASSED|m=65|m=128" $W/kernels_gpu_linear_fp8.log | head -12
OPS="attn.q_a_proj|attn.q_b_proj|attn.kv_a_proj|attn.indexer.wq_b|attn.indexer.wk|attn.o_proj|attn.qkv_a_proj|attn.q_up_proj|mlp.gate_up|mlp.down|moe.shared.gate_up|moe.shared.down|moe.experts"
v() {  # VARIANT TAG BATCH CONTEXT
  case $1 in
    A) device_round_profile $2-A $3 $4 "$OPS" ;;
    B) device_round_profile $2-B $3 $4 "$OPS" --fp8-large-m block-scaled ;;
    C) device_round_profile $2-C $3 $4 "$OPS" --fp8-mma-max-m 128 ;;
    D) device_round_profile $2-D $3 $4 "$OPS" --fp8-large-m block-scaled --fp8-mma-max-m 16 ;;
  esac
}
r=0; for order in "A B C" "C B A"; do r=$((r + 1)); for x in $order; do v $x b128-r$r 128 8192; done; done
r=0; for order in "A D" "D A"; do r=$((r + 1)); for x in $order; do v $x b32-r$r 32 32768; done; done
device_round_pack
