#!/usr/bin/env bash
# Device call A (2026-11-29 session 2): fuzzers in the background (CPU), all GPU tests (3 at a time)
# beside compute-sanitizer, then the kernel benchmark alone on the GPU. Everything comes back in
# $OUT/a.tar.gz plus the printed summary.
set -u
T0=$(date +%s); el() { echo "[+$(( $(date +%s) - T0 ))s]"; }
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared" PATH="$PATH:/usr/local/cuda/bin"
W=/tmp/a; mkdir -p $W
( tools/device_fuzz.sh .device/fuzz $W/fuzz 75 8 > $W/fuzz.log 2>&1; echo "fuzz rc=$?" >> $W/fuzz.log ) &
FZ=$!
echo "=== tests + sanitizer $(el)"
( SAN_BUDGET=230 timeout 260 tools/device_sanitize.sh .device/bin $W/sanitize > $W/sanitize.log 2>&1; echo "sanitize rc=$?" >> $W/sanitize.log ) &
SZ=$!
GLM5_BINARY_DIR=$PWD/.device/bin tools/device_tests.sh .device/bin $W/tests 3 210 > $W/tests.txt 2>&1
wait $SZ
echo "=== tests done $(el)"; sed -n '/==== table/,$p' $W/tests.txt
tail -25 $W/sanitize.log
echo "=== bench $(el)"
timeout 230 .device/bin/glm5prof bench kernels --out $W/kv-kernels.json > $W/bench.txt 2>&1; echo "bench rc=$?"
tail -70 $W/bench.txt
wait $FZ; echo "=== fuzz $(el)"; tail -12 $W/fuzz.log
tar czf $OUT/a.tar.gz -C /tmp a
echo "=== done $(el)"
