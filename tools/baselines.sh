#!/usr/bin/env bash
# Regenerates the H200 baselines in reports/baselines on a GPU machine and compares a fresh run with
# them through the regression gate.   tools/baselines.sh BUILD_DIR [update]
set -euo pipefail
bin=${1:?build dir with glm5prof}; mode=${2:-compare}
common=(--model glm5 --batch 1 --context 32768 --pool-tokens 495000 --steps 8 --warmup 2)
tmp=$(mktemp -d)
"$bin/glm5prof" profile "${common[@]}" --kv-path fp8 --out "$tmp/fp8" >/dev/null
"$bin/glm5prof" profile "${common[@]}" --kv-path cast --out "$tmp/cast" >/dev/null
if [ "$mode" = update ]; then
  cp "$tmp/fp8/report.json" reports/baselines/h200-glm5-b1-ctx32k-fp8.json
  cp "$tmp/cast/report.json" reports/baselines/h200-glm5-b1-ctx32k-cast.json
  echo "baselines updated"
else
  "$bin/glm5prof" diff reports/baselines/h200-glm5-b1-ctx32k-fp8.json "$tmp/fp8/report.json" --junit "$tmp/junit.xml"
fi
