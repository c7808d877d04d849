#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer run of the CPU tests: configures build-asan with
# GLM5_SANITIZE=ON (C++ compiled and linked with -fsanitize=address,undefined; CUDA files are not
# instrumented), builds glm5prof and the CPU test executables (tests/*/test_*), and runs
# `ctest -LE gpu`. Any sanitizer report fails the test it happens in (halt_on_error).
# Usage: tools/sanitize.sh [ctest args...]   e.g. tools/sanitize.sh -R trace_
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
build=${GLM5_ASAN_BUILD:-build-asan}
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLM5_SANITIZE=ON > "$build/cmake.log" 2>&1 \
  || { cat "$build/cmake.log"; exit 1; }
# Every CPU test executable and glm5prof as one target (glm5_cpu_tests, CMakeLists.txt): one make, so -j applies
# across all their sources (several --target goals were built one after the other).
cmake --build "$build" -j"$(nproc)" --target glm5_cpu_tests
# protect_shadow_gap=0: the CUDA driver maps memory where ASan's shadow gap would be.
# Leaks are findings too; tools/lsan.supp names the CUDA libraries whose own allocations are not ours.
export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:halt_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tools/lsan.supp:print_suppressions=0}
# The gpu_* executables are not built here: their placeholder tests (*_gpu_*_NOT_BUILT) are skipped.
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -LE gpu -E '_gpu_.*_NOT_BUILT$' "$@"
