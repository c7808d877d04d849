#!/usr/bin/env bash
# Times `glm5prof analyze` on a synthetic Kineto trace of about SIZE_MB megabytes (plain .json and its
# .json.gz) and prints the read rate [MB of JSON per second of wall time] and the peak RSS
# (/usr/bin/time -v). The whole command is timed: read + attribution + analysis + report.
# Usage: tools/bench_trace_reader.sh [SIZE_MB (500)] [GLM5PROF (build/glm5prof)]
# Env: BENCH_DIR (default /tmp/glm5_bench_trace) holds the generated traces; they are kept for reruns
# of the same size. Needs python3, gzip and /usr/bin/time (Debian package `time`).
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb=${1:-500}
bin=${2:-build/glm5prof}
dir=${BENCH_DIR:-/tmp/glm5_bench_trace}
[ -x "$bin" ] || { echo "bench: no executable $bin (build the glm5prof target first)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
mkdir -p "$dir"
trace="$dir/kineto_${size_mb}mb.json"
if [ ! -s "$trace" ] || [ ! -s "$trace.gz" ]; then
  echo "bench: writing $trace (+ .gz) ..."
  python3 tools/gen_kineto_trace.py "$trace" --mb "$size_mb" --gzip
fi
json_bytes=$(stat -c %s "$trace")
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ)"
echo "binary: $bin"
printf '%-34s %10s %10s %10s %12s %12s\n' file "file MB" "JSON MB" "wall s" "JSON MB/s" "peak RSS MB"
for f in "$trace" "$trace.gz"; do
  out="$dir/out_$(basename "$f")"
  rm -rf "$out"
  log="$dir/time_$(basename "$f").txt"
  # Page cache warm for the plain file (the rate of the reader, not of the disk): read it once first.
  cat "$f" >/dev/null
  /usr/bin/time -v "$bin" analyze "$f" --out "$out" >"$dir/stdout_$(basename "$f").txt" 2>"$log" || {
    echo "bench: analyze failed on $f:" >&2; tail -5 "$log" >&2; exit 1; }
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$log" |
         awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }')
  user=$(sed -n 's/.*User time (seconds): //p' "$log")
  sys=$(sed -n 's/.*System time (seconds): //p' "$log")
  rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$log")
  awk -v f="$(basename "$f")" -v fb="$(stat -c %s "$f")" -v jb="$json_bytes" -v w="$wall" -v r="$rss_kb" -v u="$user" -v s="$sys" \
    'BEGIN { printf "%-34s %10.1f %10.1f %10.2f %12.1f %12.1f   (user %.2f s, sys %.2f s)\n", f, fb / 1e6, jb / 1e6, w, jb / 1e6 / w, r / 1024, u, s }'
done
