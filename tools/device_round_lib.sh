# Sourced by the device-round scripts (device_round_b1.sh, device_round_topk.sh, device_round_moe.sh); runs on the
# device machine from the repository root, where $OUT is the folder whose files come back.
#   device_round_begin TAG   W=$OUT/TAG, .device/pack.tar.xz unpacked, LD_LIBRARY_PATH / GLM5_SHARED_DIR set, BIN
#   device_round_step B W G T OPS
#                            tools/decode_step_bench.sh with BATCHES=B WEIGHTS=W GRAPHS=G under timeout T, the
#                            decode-step.json summary, and each run's `fp8` op-table rows matching the regex OPS
#   device_round_pack        traces dropped, $OUT/TAG.tar.gz written, the folder removed
device_round_begin() {
  TAG=$1
  W=$OUT/$TAG
  mkdir -p "$W"
  tar xJf .device/pack.tar.xz -C .device
  export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
  BIN=$PWD/.device/bin
}
device_round_step() {
  BATCHES="$1" WEIGHTS="$2" GRAPHS="$3" timeout "$4" tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step" > "$W/step.txt" 2>&1
  echo "step rc=$?"
  python3 tools/decode_step_summary.py "$W/step/decode-step.json" 2>&1 | tail -n 30
  for d in "$W"/step/runs/*/; do
    [ -f "$d/report.md" ] && { echo "== $d"; sed -n '/## Run `fp8`/,/Per-layer/p' "$d/report.md" | grep -E "$5"; }
  done
}
device_round_pack() {
  rm -rf "$W"/step/runs/*/trace.json
  (cd "$OUT" && tar czf "$TAG.tar.gz" "$TAG" && rm -rf "$TAG")
}
