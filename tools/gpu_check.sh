#!/usr/bin/env bash
# One device call: run every GPU test executable, then the main job (GLM-5, three KV paths), and
# print a short table last. Usage on the GPU machine, from the repository root:
#   tools/gpu_check.sh BIN_DIR OUT_DIR [profile args...]
# BIN_DIR holds glm5prof and the *_gpu_* test executables (built here or there with
# `cmake --build build`); GLM5_SHARED_DIR must point at a folder with golden/glm5-tiny.
set -u
# Libraries built here that the GPU image lacks (e.g. libsimdjson) travel in .device/lib.
[ -d .device/lib ] && export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}"
bin=${1:?bin dir}; out=${2:?out dir}; shift 2
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/device.txt"
summary=()
for t in "$bin"/*_gpu_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  start=$(date +%s)
  timeout 300 "$t" --gtest_brief=0 > "$out/$name.log" 2>&1
  rc=$?
  pass=$(grep -c '^\[       OK \]' "$out/$name.log")
  fail=$(grep -c '^\[  FAILED  \]' "$out/$name.log")
  summary+=("$(printf '%-34s rc=%-3s ok=%-3s failed=%-3s %ss' "$name" "$rc" "$pass" "$fail" $(( $(date +%s) - start )))")
done
if [ $# -gt 0 ]; then
  start=$(date +%s)
  timeout 400 "$bin/glm5prof" profile --out "$out/profile" "$@" > "$out/profile.log" 2>&1
  rc=$?
  summary+=("$(printf '%-34s rc=%-3s %ss' "glm5prof profile $*" "$rc" $(( $(date +%s) - start )))")
fi
echo "==== GPU test logs (failures) ===="
grep -h -B2 -A12 'Failure\|FAILED\|error' "$out"/*_gpu_*.log 2>/dev/null | head -120
echo "==== measurements ===="
grep -h 'GB/s\|TFLOP\|relative error\|step median\| us' "$out"/*.log 2>/dev/null | head -60
echo "==== summary ===="
printf '%s\n' "${summary[@]}"
