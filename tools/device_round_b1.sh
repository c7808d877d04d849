#!/usr/bin/env bash
# One device call for a batch-1 decode-step change: the GPU tests named in TESTS (executables packed under
# .device/bin, each run whole), the probes named in PROBES (run in turn), then the decode step with the weights /
# batches in STEP_WEIGHTS / STEP_BATCHES (graphs on; default batch 1, FP8 weights) and its op table.
# Calls made with it: S10f (session 10: the MoE combine and residual add fused into the per-token down launch).
#   tools/device_pack.sh build-lead glm5prof TESTS... PROBES...; run `TESTS=... PROBES=... bash THIS TAG`, carry [".device"]
set -u
TAG=${1:-b1}
W=$OUT/$TAG; mkdir -p $W
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin
for t in ${TESTS:-}; do
  timeout ${TEST_TIMEOUT:-200} $BIN/$t > $W/$t.log 2>&1; echo "$t rc=$?"
  grep -E "Failure|FAILED|PASSED|^moe fused|^moe pair" $W/$t.log | head -20
done
for p in ${PROBES:-}; do timeout 120 $BIN/$p 2>&1 | tee $W/$p.txt; done
BATCHES="${STEP_BATCHES:-1}" WEIGHTS="${STEP_WEIGHTS:-fp8}" GRAPHS=${STEP_GRAPHS:-1} timeout ${STEP_TIMEOUT:-200} \
  tools/decode_step_bench.sh $BIN/glm5prof $W/step > $W/step.txt 2>&1; echo "step rc=$?"
python3 tools/decode_step_summary.py $W/step/decode-step.json 2>&1 | tail -n 30
for d in $W/step/runs/*/; do [ -f $d/report.md ] && { echo "== $d"; sed -n '/## Run `fp8`/,/Per-layer/p' $d/report.md | grep -E "^\| (attn|moe|mlp)"; }; done
rm -rf $W/step/runs/*/trace.json
(cd $OUT && tar czf $TAG.tar.gz $TAG && rm -rf $TAG)
