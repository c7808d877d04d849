#!/usr/bin/env bash
# One device call checking and timing the expert-grouped MoE kernels (kernels/moe.cu): gpu_moe_grouped (the
# tensor-core kernels within their per-output bound of exact arithmetic, FP8 and BF16 experts), `glm5prof bench
# kernels --only moe` and the decode step with the weights / batches in STEP_WEIGHTS / STEP_BATCHES (graphs on).
# Calls made with it: S9d, S9g, S9h (session 9: BF16 experts on the tensor cores; S9g/S9h: STEP_BATCHES as their records say). Results: reports/2026-11-30-h200-decode-step.md.
#   tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_grouped; run `bash THIS TAG` with carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin "${1:-moe}"
timeout ${TEST_TIMEOUT:-240} $BIN/kernels_gpu_moe_grouped --gtest_filter="${TEST_FILTER:-GpuMoeGrouped.MatchesPerTokenAndCpu}" > $W/moe_test.log 2>&1
echo "moe test rc=$?"; grep -E "moe grouped|Failure|FAILED|PASSED|OK \]" $W/moe_test.log | head -30
timeout 150 $BIN/glm5prof bench kernels --only moe --reps ${REPS:-10} --out $W/moe.json > $W/moe.txt 2>&1; echo "moe bench rc=$?"
grep -E "^  (moe_|copy|gemm)" $W/moe.txt | head -20
device_round_step "${STEP_BATCHES:-8 32 128}" "${STEP_WEIGHTS:-bf16}" 1 "${STEP_TIMEOUT:-240}" "moe.experts"
device_round_pack
