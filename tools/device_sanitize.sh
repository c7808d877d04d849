#!/usr/bin/env bash
# compute-sanitizer over the GPU test executables (issue 7), on the GPU machine, from the repository root:
#   tools/device_sanitize.sh BIN OUT [TOOLS]      TOOLS default "memcheck racecheck synccheck initcheck"
# BIN holds the prebuilt kernels_gpu_* / model_gpu_* / engine_gpu_* tests (and GLM5_SHARED_DIR must
# reach golden/glm5-tiny as for tools/gpu_check.sh). Each executable runs with a gtest filter that keeps
# its small shapes (the GLM-5-sized and timing tests are left out: under memcheck they take minutes),
# under `compute-sanitizer --tool T --error-exitcode 99` (memcheck also --leak-check full), 4 runs at a
# time on the one GPU, each run at most 75 s, all of it at most SAN_BUDGET s (env, default 280; runs
# not started by SAN_BUDGET - 75 s are listed as "not run"). Writes OUT/<tool>-<exe>.log and
# OUT/summary.md: tool, executable, filter, sanitizer errors, test result, seconds. Exit 0 when every run that finished reported 0 errors.
# Flags used exist in CUDA 12 and 13: --tool, --error-exitcode, --leak-check full, --print-limit,
# --racecheck-report (racecheck hazards are errors or warnings; errors count).
set -u
if [ "${1:-}" = "--one" ]; then  # internal: one run.   --one TOOL EXE FILTER OUT
  tool=$2; exe=$3; filter=$4; out=$5
  name=$(basename "$exe")
  log="$out/$tool-$name.log"
  extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  if [ "$tool" = racecheck ]; then
    [ "${SAN_RACECHECK_REPORT:-1}" = 1 ] && extra+=(--racecheck-report all)
    # cuBLASLt's nvjet GEMM kernels (NVIDIA's code, not ours) make racecheck report WAR hazards on
    # their shared-memory pipelines (770 on kernels_gpu_linear, H200 run of 2026-11-29): not checked.
    [ "${SAN_KERNEL_EXCLUDE:-1}" = 1 ] && extra+=(--kernel-name-exclude kns=nvjet)
  fi
  start=$(date +%s)
  timeout 75 compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 "${extra[@]}" \
    "$exe" --gtest_filter="$filter" > "$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  errs=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' "$log" | tail -1 | grep -oE '[0-9]+')
  if [ "$tool" = racecheck ]; then  # "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)"
    e2=$(grep -oE 'RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?' "$log" | tail -1 | grep -oE '[0-9]+ errors?' | grep -oE '[0-9]+')
    [ -n "$e2" ] && errs=$e2
  fi
  ok=$(grep -c '^\[       OK \]' "$log"); failed=$(grep -c '^\[  FAILED  \]' "$log"); skipped=$(grep -c '^\[  SKIPPED \]' "$log")
  case $rc in
    0) result="pass ($ok ok, $skipped skipped)";;
    99) result="sanitizer errors ($ok ok, $failed failed)";;
    124|137) result="TIMEOUT after 75 s"; errs=${errs:-?};;
    *) result="rc $rc ($ok ok, $failed failed)";;
  esac
  printf '| %s | %s | `%s` | %s | %s | %s |\n' "$tool" "$name" "$filter" "${errs:-?}" "$result" "$secs" >> "$out/rows.txt"
  exit 0
fi

[ -d .device/lib ] && export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}"
bin=${1:?usage: tools/device_sanitize.sh BIN OUT [TOOLS]}; out=${2:?usage: tools/device_sanitize.sh BIN OUT [TOOLS]}
tools=${3:-memcheck racecheck synccheck initcheck}
mkdir -p "$out"; : > "$out/rows.txt"
command -v compute-sanitizer > /dev/null || export PATH="$PATH:/usr/local/cuda/bin"
command -v compute-sanitizer > /dev/null || { echo "device_sanitize: compute-sanitizer not found (CUDA toolkit bin)"; exit 2; }
compute-sanitizer --version | tail -1
# The flags this script passes, checked against this compute-sanitizer's --help.
help=$(compute-sanitizer --help 2>&1)
for flag in --tool --error-exitcode --leak-check --print-limit --racecheck-report --kernel-name-exclude; do
  grep -q -- "$flag" <<< "$help" || echo "device_sanitize: warning: this compute-sanitizer has no $flag"
done
grep -q -- --racecheck-report <<< "$help" || export SAN_RACECHECK_REPORT=0
grep -q -- --kernel-name-exclude <<< "$help" || export SAN_KERNEL_EXCLUDE=0

# Executable -> gtest filter (small shapes only). Executables not listed run with '*'.
declare -A filter=(
  [kernels_gpu_elementwise]='*'
  [kernels_gpu_indexer]='GpuIndexer.ScoresMatchCpu:GpuIndexer.TopkEqualsCpu'
  [kernels_gpu_kv_cache]='*'
  [kernels_gpu_kv_cast]='GpuKvCast.CastMatchesCpu:GpuKvCast.GatherCastMatchesCpu:GpuKvCast.GatherCastAllInvalid:GpuKvCast.EmptyCastsWriteNothing'
  [kernels_gpu_linear]='GpuLinear.AccumulateAndUnalignedOutput:GpuLinear.BadParamsThrow'
  [kernels_gpu_linear_fp8]='GpuLinearFp8.OddShapesUseScalarPathAndAgree'
  [kernels_gpu_mla_absorb]='*'
  [kernels_gpu_mla_decode]='GpuMlaDecodeSplit.*:GpuMlaDecodeKernelChoice.*'
  [kernels_gpu_moe]='GpuMoe.RouteMatchesCpuTwin:GpuMoe.ExpertsOddSizes:GpuMoe.BadParamsThrowBeforeLaunch'
  [kernels_gpu_moe_grouped]='*'
  [kernels_gpu_norm]='*'
  [kernels_gpu_rope]='*'
  [kernels_gpu_topk_paths]='GpuTopkPaths.EqualsCpuOnEveryPath'
  [model_gpu_synthetic]='GpuSynthetic.DeviceEqualsHostBitForBit:GpuLoadWeights.GoldenDeviceEqualsHost'
  [engine_gpu_golden]='GoldenGpu.Fp8PathsAgreeWithEachOtherAndWithTheCpuEngine'
  [engine_gpu_graph]='GraphGpu.TinyModelReplayMatchesEager'
  [engine_gpu_fp8_weights]='*'
  [engine_gpu_tensor_parallel]='-*'   # needs 2+ GPUs
  [kernels_gpu_moe_grouped]='-*'      # one GLM-5-sized test, 126 s without a sanitizer
)
# Per-tool overrides (TOOL:EXE), from the H200 run of 2026-11-29 where these timed out at 75 s:
# racecheck instruments every shared-memory access of the radix top-k over 200k-token rows.
declare -A tool_filter=(
  [racecheck:kernels_gpu_indexer]='GpuIndexer.ScoresMatchCpu'
  [racecheck:kernels_gpu_topk_paths]='-*'
)
jobs="$out/jobs.txt"; : > "$jobs"
for tool in $tools; do
  for exe in "$bin"/kernels_gpu_* "$bin"/model_gpu_* "$bin"/engine_gpu_*; do
    [ -x "$exe" ] || continue
    name=$(basename "$exe")
    f=${tool_filter[$tool:$name]:-${filter[$name]:-*}}
    if [ "$f" = '-*' ]; then
      printf '| %s | %s | - | - | skipped (2+ GPUs or too slow under this tool; see the script) | 0 |\n' "$tool" "$name" >> "$out/rows.txt"
      continue
    fi
    # racecheck / synccheck: kernels only; initcheck: kernels and model (the engine tests run past 75 s).
    case $tool in
      racecheck|synccheck) [[ $name == kernels_gpu_* ]] || continue;;
      initcheck) [[ $name == engine_gpu_* ]] && continue;;
    esac
    echo "$tool $exe $f" >> "$jobs"
  done
done
echo "device_sanitize: $(wc -l < "$jobs") runs, 4 at a time"
start=$(date +%s)
# Each line: TOOL EXE FILTER. Stop starting runs once SAN_BUDGET - 75 s have passed.
cutoff=$(( ${SAN_BUDGET:-280} - 75 ))
while read -r tool exe f; do
  if [ $(( $(date +%s) - start )) -gt "$cutoff" ]; then
    printf '| %s | %s | `%s` | - | not run (time budget) | 0 |\n' "$tool" "$(basename "$exe")" "$f" >> "$out/rows.txt"
    continue
  fi
  while [ "$(jobs -rp | wc -l)" -ge 4 ]; do sleep 0.5; done
  "$0" --one "$tool" "$exe" "$f" "$out" < /dev/null &
done < "$jobs"
wait
{
  echo "# compute-sanitizer over the GPU tests ($(date -u +%F), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
  echo
  echo "$(compute-sanitizer --version | tail -1); $(( $(date +%s) - start )) s in all."
  echo
  echo "| tool | executable | gtest filter | errors | tests | s |"
  echo "|---|---|---|---:|---|---:|"
  sort "$out/rows.txt"
} > "$out/summary.md"
rm -f "$out/rows.txt"
cat "$out/summary.md"
bad=$(grep -cE '^\| [a-z]+ \| [^|]+ \| [^|]+ \| [1-9?]' "$out/summary.md")
echo "device_sanitize: $bad run(s) with sanitizer errors or unknown counts"
[ "$bad" -eq 0 ]
