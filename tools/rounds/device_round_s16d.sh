#!/usr/bin/env bash
# Session 16, call S16d: the register cap of the batch-1 FP8 MoE kernels (MoeExpertsParams::gate_up_ctas_per_sm /
# down_ctas_per_sm, EngineOptions::moe_pair_ctas, profile --moe-pair-ctas). moe.experts is 7.1 ms of the 18.2 ms
# batch-1 step at 75% of copy (S16c op table: 3186 GB/s); ptxas gives both per-token kernels 96 registers, so 2 CTAs
# of 256 threads per SM (16 warps, ~4 KB of weight loads in flight each). Capped at 3 CTAs (80 registers; the down
# kernel spills 32 bytes) there are 24 warps per SM: predicted closer to copy, ~0.3-0.7 ms per step if the weight
# stream is latency-bound.
#  1. kernels_gpu_linear_fp8's GpuMoeFp8 tests (every cap bitwise the default, with and without pair_out);
#  2. the decode step at batch 1, --moe-pair-ctas 3 (A) against 2 (B), A B B A, context 32768;
#  3. bench kernels --only moe-pair (the four caps at GLM-5 size, batch 1, each checked bitwise against the first).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s16d
timeout 100 $BIN/kernels_gpu_linear_fp8 --gtest_filter='GpuMoeFp8.*' > $W/gpu_moe_fp8.log 2>&1; echo "GpuMoeFp8 rc=$?"
grep -E "^\[  (PASSED|FAILED) |Failure|Expected|Which is|fp8 moe" $W/gpu_moe_fp8.log | head -12
OPS="moe.experts|moe.shared|moe.router|moe.route"
r=0; for x in A B B A; do r=$((r + 1))
  if [ $x = A ]; then device_round_profile b1-$r-A 1 32768 "$OPS" --moe-pair-ctas 3; else device_round_profile b1-$r-B 1 32768 "$OPS" --moe-pair-ctas 2; fi
done
timeout 120 $BIN/glm5prof bench kernels --only moe-pair --out $W/moe_pair.json > $W/moe_pair.txt 2> $W/moe_pair.err
echo "bench rc=$?"; tail -2 $W/moe_pair.err; grep -E "moe_experts|copy|gemm" $W/moe_pair.txt | head -12
device_round_pack
