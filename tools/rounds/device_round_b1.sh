#!/usr/bin/env bash
# One device call for a batch-1 decode-step change: the GPU tests named in TESTS (executables packed under
# .device/bin, each run whole), the probes named in PROBES (run in turn), then the decode step with the weights /
# batches in STEP_WEIGHTS / STEP_BATCHES (graphs on; default batch 1, FP8 weights) and its op table.
# Calls made with it: S10f (session 10: the MoE combine and residual add fused into the per-token down launch).
#   tools/device_pack.sh build-lead glm5prof TESTS... PROBES...; run `TESTS=... PROBES=... bash THIS TAG`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin "${1:-b1}"
for t in ${TESTS:-}; do
  timeout ${TEST_TIMEOUT:-200} $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$?"
  grep -E "Failure|FAILED|PASSED|^moe fused|^moe pair" $W/$t.log | head -20
done
for p in ${PROBES:-}; do timeout 120 $BIN/$p 2>&1 | tee $W/$p.txt; done
device_round_step "${STEP_BATCHES:-1}" "${STEP_WEIGHTS:-fp8}" "${STEP_GRAPHS:-1}" "${STEP_TIMEOUT:-200}" "^\| (attn|moe|mlp)"
device_round_pack
