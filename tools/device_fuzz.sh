#!/usr/bin/env bash
# Long libFuzzer run of every fuzz target on the GPU machine's CPU cores (issue 7: millions of
# executions each). CPU-only work; run from the repository root (seeds: fuzz/corpus/<target>/).
#   tools/device_fuzz.sh FUZZBIN OUT SECONDS [WORKERS]
# FUZZBIN holds the fuzz_<target> binaries built by tools/fuzz.sh (clang, ASan+UBSan, libFuzzer).
# Each target in turn runs SECONDS with WORKERS parallel jobs (default: all cores): libFuzzer
# -jobs=W -workers=W, each job -max_total_time=SECONDS, all sharing one corpus (under /tmp) so new
# inputs found by one job reach the others at their next reload. Prints per target: executions
# (sum of the jobs' "Done N runs"), jobs, new corpus files, crashes / leaks / timeouts (artifacts);
# writes OUT/fuzz-summary.md and copies crash artifacts (at most 20 per target) to OUT/artifacts/.
# Total time ~ targets x SECONDS. Exit 0 when no target crashed.
set -u
fuzzbin=${1:?usage: tools/device_fuzz.sh FUZZBIN OUT SECONDS [WORKERS]}
out=${2:?usage: tools/device_fuzz.sh FUZZBIN OUT SECONDS [WORKERS]}
seconds=${3:?usage: tools/device_fuzz.sh FUZZBIN OUT SECONDS [WORKERS]}
workers=${4:-$(nproc)}
# Absolute paths: the fuzzers run from per-target log folders (libFuzzer -jobs writes fuzz-N.log there).
fuzzbin=$(realpath "$fuzzbin"); mkdir -p "$out"; out=$(realpath "$out")
[ -d .device/lib ] && export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}"
mkdir -p "$out/artifacts"
root=$PWD
work=$(mktemp -d /tmp/glm5_fuzz.XXXXXX)
# Leaks are reported by LeakSanitizer at exit of each job; detect_leaks stays on (as in tools/fuzz.sh).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
rows=()
crashed=0
for bin in "$fuzzbin"/fuzz_*; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  target=${bin##*/fuzz_}
  seeds="$root/fuzz/corpus/$target"
  corpus="$work/corpus/$target"; art="$work/artifacts/$target/"; logs="$work/logs/$target"
  mkdir -p "$corpus" "$art" "$logs"
  before=$(ls "$corpus" | wc -l)
  dict=(); [ -f "$root/fuzz/json.dict" ] && [ "$target" != safetensors ] && dict=(-dict="$root/fuzz/json.dict")
  start=$(date +%s)
  # -jobs writes fuzz-<N>.log in the working directory: run from the per-target log folder.
  ( cd "$logs" && timeout $(( seconds + 120 )) "$bin" -jobs="$workers" -workers="$workers" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$art" "${dict[@]}" "$corpus" $( [ -d "$seeds" ] && echo "$seeds" ) \
      > "$logs/main.log" 2>&1 )
  rc=$?
  secs=$(( $(date +%s) - start ))
  execs=$(cat "$logs"/fuzz-*.log 2>/dev/null | grep -oE 'Done [0-9]+ runs' | awk '{s += $2} END {print s + 0}')
  if [ "$execs" = 0 ]; then  # jobs killed before their final line: the last status line of each
    execs=$(for f in "$logs"/fuzz-*.log; do grep -oE '^#[0-9]+' "$f" | tail -1 | tr -d '#'; done | awk '{s += $1} END {print s + 0}')
  fi
  jobsrun=$(ls "$logs"/fuzz-*.log 2>/dev/null | wc -l)
  crashes=$(ls "$art" | grep -c '^crash-'); leaks=$(ls "$art" | grep -c '^leak-'); tmo=$(ls "$art" | grep -c '^timeout-')
  ooms=$(ls "$art" | grep -c '^oom-')
  new=$(( $(ls "$corpus" | wc -l) - before ))
  [ $(( crashes + leaks )) -gt 0 ] && crashed=1
  mkdir -p "$out/artifacts/$target"
  ls "$art" | head -20 | while read -r f; do cp "$art/$f" "$out/artifacts/$target/"; done
  # First report of each crash kind, for the summary.
  first=$(grep -hE '^==[0-9]+==ERROR|runtime error:|SUMMARY: ' "$logs"/fuzz-*.log 2>/dev/null | sort | uniq -c | sort -rn | head -3 | tr '\n' ';')
  rows+=("$(printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |' "$target" "$execs" "$jobsrun" "$secs" "$new" \
            "$crashes" "$leaks" "$tmo/$ooms" "${first:-}")")
  printf 'fuzz %-14s %12s execs  %3s jobs  %4ss  +%s corpus  crashes %s  leaks %s  timeouts/ooms %s/%s  (rc %s)\n' \
    "$target" "$execs" "$jobsrun" "$secs" "$new" "$crashes" "$leaks" "$tmo" "$ooms" "$rc"
done
{
  echo "# libFuzzer, $(nproc) cores, $seconds s per target, $workers jobs ($(date -u +%F))"
  echo
  echo "| target | executions | jobs | s | new corpus | crashes | leaks | timeouts/ooms | first reports |"
  echo "|---|---:|---:|---:|---:|---:|---:|---|---|"
  printf '%s\n' "${rows[@]}"
} > "$out/fuzz-summary.md"
cat "$out/fuzz-summary.md"
rm -rf "$work"
exit $crashed
