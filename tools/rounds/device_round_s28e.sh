#!/usr/bin/env bash
# Session 28, call S28e. The fp16-operand wgmma MLA (MlaDecodeKernel::WgmmaF16) made Auto's form for FP8 rows
# (MlaDecodeParams::fp8_bf16_operands false; `profile --mla-fp8-operands f16|bf16`, default f16), its CPU twin mode
# (fp16 K / V values). The MLA GPU tests (WgmmaF16 against the fp16 twin at the bf16 kernel's tolerance; Auto's default
# form; BF16 rows ignore the flag), engine_gpu_graph and engine_gpu_golden on this build, then attn.mla in the decode
# step at batch 32 and 128 (context 32768 / 8192), f16 (A) against bf16 (B) operands, A B.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode engine_gpu_graph engine_gpu_golden;
#        .device/shared holding ../shared/golden and ../shared/configs; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s28e
device_round_test kernels_gpu_mla_decode 200 --gtest_filter='Shapes/*:GpuMlaDecodeKernelChoice*'
grep -E "wgmma fp16 operands vs fp16 twin" $W/kernels_gpu_mla_decode.log | sort -t' ' -k9 -g | tail -3
device_round_test engine_gpu_golden 150
device_round_test engine_gpu_graph 100
device_round_ab_at 32 32768 "attn.mla" "A B" "--mla-fp8-operands f16" "--mla-fp8-operands bf16"
device_round_ab_at 128 8192 "attn.mla" "A B" "--mla-fp8-operands f16" "--mla-fp8-operands bf16"
device_round_pack
