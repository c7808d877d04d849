#!/usr/bin/env bash
# libFuzzer targets for every parser of outside input (fuzz/fuzz_*.cpp):
#   model_config  parse_model_config (HuggingFace config.json)
#   safetensors   SafetensorsFile::open (header length, JSON header, data offsets)
#   chrome_trace  read_chrome_trace + analyze + report (Chrome / Kineto traces, `glm5prof analyze`)
#   diff          load_report_or_trace + diff_reports + diff outputs (`glm5prof diff` inputs)
# Installs clang, its runtimes and lld (Debian: clang, libclang-rt-14-dev, lld) when missing, compiles the CPU
# sources the parsers need directly with clang++ -fsanitize=fuzzer,address,undefined (no CUDA code,
# no CMake) into build-fuzz/, then runs each target for SECONDS (default 60).
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]
# Seeds: fuzz/corpus/<target>/ (read only); new inputs go to build-fuzz/corpus/<target>/; a crash is
# saved under build-fuzz/artifacts/<target>/ and fails the script (exit 1). Reproduce one with
#   build-fuzz/fuzz_<target> build-fuzz/artifacts/<target>/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
all_targets=(model_config safetensors chrome_trace diff)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

tools/setup.sh >/dev/null
CXX=${CLANGXX:-clang++}
rt_ok() { "$CXX" -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null | grep -q /; }
if ! command -v "$CXX" >/dev/null 2>&1 || ! rt_ok || ! command -v ld.lld >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends clang libclang-rt-14-dev lld
fi
rt_ok || { echo "fuzz: $CXX has no libFuzzer runtime (libclang_rt.fuzzer); install libclang-rt-<version>-dev" >&2; exit 1; }

out=build-fuzz
mkdir -p "$out/obj"
cuda_inc=/usr/local/cuda/include
[ -d "$cuda_inc" ] || cuda_inc=$(dirname "$(command -v nvcc)")/../include
san=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
# -ffunction-sections + lld --gc-sections: functions the targets never reach (e.g. ModelConfig::
# parameter_count -> model/weights.cpp -> CUDA sources) are dropped instead of needing their code
# (GNU ld still reports their undefined references; lld does not).
cxxflags=(-std=c++20 -O1 -g "${san[@]}" -ffunction-sections -fdata-sections -I src -I . -isystem "$cuda_inc")
# The CPU parts the parsers reach: no CUDA sources, no CUDA runtime.
lib_srcs=(src/common/dtype.cpp src/common/input_file.cpp src/common/json_excerpt.cpp src/model/config.cpp src/model/builtin_configs.cpp src/model/safetensors.cpp src/model/tensor_specs.cpp
          src/trace/*.cpp src/analysis/*.cpp src/report/*.cpp)

compile() {  # compile SRC OBJ EXTRA... (skipped when OBJ is newer than SRC and every header)
  local src=$1 obj=$2; shift 2
  if [ -f "$obj" ] && [ -z "$(find "$src" src fuzz -newer "$obj" \( -name '*.h' -o -path "$src" \) -print -quit)" ]; then
    return 0
  fi
  "$CXX" "${cxxflags[@]}" "$@" -c "$src" -o "$obj"
}
pids=()
objs=()
for s in "${lib_srcs[@]}"; do
  o=$out/obj/$(echo "$s" | tr / _).o
  objs+=("$o")
  compile "$s" "$o" -fsanitize=fuzzer-no-link &
  pids+=($!)
  if [ ${#pids[@]} -ge "$(nproc)" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p"; done
for t in "${targets[@]}"; do
  compile "fuzz/fuzz_$t.cpp" "$out/obj/fuzz_$t.o" -fsanitize=fuzzer
  "$CXX" "${san[@]}" -fsanitize=fuzzer "$out/obj/fuzz_$t.o" "${objs[@]}" -fuse-ld=lld -Wl,--gc-sections -lsimdjson -lz -o "$out/fuzz_$t"
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
summary=()
for t in "${targets[@]}"; do
  mkdir -p "$out/corpus/$t" "$out/artifacts/$t"
  log=$out/fuzz_$t.log
  echo "fuzz: $t for ${seconds}s"
  set +e
  "$out/fuzz_$t" "$out/corpus/$t" "fuzz/corpus/$t" -dict=fuzz/json.dict -max_total_time="$seconds" \
      -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$out/artifacts/$t/" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  summary+=("$(printf '%-13s %10s runs  %6s exec/s  %s  %s' "$t" "${runs:-?}" "${rate:-?}" "${cov:-}" \
              "$([ $rc -eq 0 ] && echo ok || echo "FAILED (rc $rc, see $log)")")")
  if [ $rc -ne 0 ]; then status=1; tail -40 "$log" >&2; fi
done
printf '%s\n' "fuzz summary (${seconds}s per target):" "${summary[@]}"
exit $status
