#!/usr/bin/env bash
# Everything one device call measures for the reports (run from the repository root on the GPU
# machine, with prebuilt binaries in BIN): GPU tests, the kernel benchmark, the main GLM-5 profile,
# and the report pairs the regression gate is shown on (noise-only: the same fp8 run twice; change:
# the same deployment with a full-pool cast).   tools/device_batch.sh BIN OUT
set -u
# Libraries built here that the GPU image lacks (e.g. libsimdjson) travel in .device/lib.
[ -d .device/lib ] && export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}"
bin=${1:?bin}; out=${2:?out}
mkdir -p "$out"
tools/gpu_check.sh "$bin" "$out/gpu" > "$out/gpu_check.txt" 2>&1
tail -20 "$out/gpu_check.txt"
timeout 240 "$bin/glm5prof" bench kernels --out "$out/kv-kernels.json" > "$out/bench.txt" 2>&1
echo "bench rc=$?"; tail -40 "$out/bench.txt"
common=(--model glm5 --batch 1 --context 32768 --pool-tokens 495000 --steps 8 --warmup 2)
"$bin/glm5prof" profile "${common[@]}" --kv-path all --out "$out/main" > "$out/main.txt" 2>&1; echo "main rc=$?"; tail -6 "$out/main.txt"
"$bin/glm5prof" profile "${common[@]}" --kv-path fp8 --out "$out/fp8-a" > /dev/null 2>&1
"$bin/glm5prof" profile "${common[@]}" --kv-path fp8 --out "$out/fp8-b" > /dev/null 2>&1
"$bin/glm5prof" profile "${common[@]}" --kv-path cast --out "$out/cast" > /dev/null 2>&1
"$bin/glm5prof" diff "$out/fp8-a/report.json" "$out/fp8-b/report.json" > "$out/diff-noise.md"; echo "diff noise rc=$?"
"$bin/glm5prof" diff "$out/fp8-a/report.json" "$out/cast/report.json" > "$out/diff-change.md"; echo "diff change rc=$?"
head -12 "$out/diff-noise.md"; head -12 "$out/diff-change.md"
