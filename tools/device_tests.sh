#!/usr/bin/env bash
# All GPU test executables (ctest label `gpu`: the *_gpu_* binaries) on the GPU machine, JOBS at a
# time (correctness only: concurrent tests share the GPU, so nothing here is a timing), each under a
# time limit; prints the failures, the measured errors the tests print, and a table last.
#   tools/device_tests.sh BIN OUT [JOBS] [LIMIT_S]
# BIN holds the executables built here (carry them in .device/bin); GLM5_SHARED_DIR (default
# .device/shared) must hold golden/glm5-tiny.
set -u
bin=${1:?usage: tools/device_tests.sh BIN OUT [JOBS] [LIMIT_S]}; out=${2:?out}; jobs=${3:-3}; limit=${4:-240}
[ -d .device/lib ] && export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}"
export GLM5_SHARED_DIR=${GLM5_SHARED_DIR:-$PWD/.device/shared}
export GLM5_BINARY_DIR=${GLM5_BINARY_DIR:-$bin}  # where the CLI tests find glm5prof
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader | tee "$out/device.txt"
run_one() {
  t=$1; out=$2; limit=$3
  name=$(basename "$t"); start=$(date +%s)
  timeout "$limit" "$t" > "$out/$name.log" 2>&1; rc=$?
  printf '%-36s rc=%-3s ok=%-3s failed=%-3s %4ss\n' "$name" "$rc" "$(grep -c '^\[       OK \]' "$out/$name.log")" \
    "$(grep -c '^\[  FAILED  \]' "$out/$name.log")" $(( $(date +%s) - start )) > "$out/$name.row"
}
export -f run_one
ls "$bin"/*_gpu_* | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} "$out" "$limit"
echo "==== failures ===="
grep -h -B3 -A10 'Failure$\|^\[  FAILED  \]\|what():' "$out"/*_gpu_*.log 2>/dev/null | head -150
echo "==== measured ===="
grep -h 'rel\|error\|GB/s\|TFLOP' "$out"/*_gpu_*.log 2>/dev/null | grep -v '^\[' | head -80
echo "==== table ===="
cat "$out"/*.row
