# Sourced by the device-round scripts (device_round_b1.sh, device_round_topk.sh, device_round_moe.sh); runs on the
# device machine from the repository root, where $OUT is the folder whose files come back.
#   device_round_begin TAG   W=$OUT/TAG, .device/pack.tar.xz unpacked, LD_LIBRARY_PATH / GLM5_SHARED_DIR set, BIN
#   device_round_card        prints the card (name, memory, clock) and exports POOL_MIN=280000 on an 80 GB card, where
#                            the 495,000-token pool does not fit beside GLM-5's weights
#   device_round_layer_timeline DIR
#                            the layer-timeline table of DIR/report.md
#   device_round_step B W G T OPS
#                            tools/decode_step_bench.sh with BATCHES=B WEIGHTS=W GRAPHS=G under timeout T, the
#                            decode-step.json summary, and each run's `fp8` op-table rows matching the regex OPS
#   device_round_pack        traces dropped, $OUT/TAG.tar.gz written, the folder removed
#   device_round_profile TAG BATCH CONTEXT OPS ARGS...
#                            one `glm5prof profile` of GLM-5 (FP8 weights, fp8 KV path, graphs; 2 warm-up, 3 untraced,
#                            2 traced steps; the pool sized for the batch, at least POOL_MIN (default 495,000) tokens)
#                            into $W/TAG, with ARGS
#                            appended: prints the untraced step time and the op-table rows whose op matches the regex OPS
#   device_round_ab OPS ORDER ARGS_A ARGS_B
#                            device_round_profile at batch 1 / 32768 tokens once per letter of ORDER ("A B B A"), with
#                            ARGS_A or ARGS_B (one string each, split on spaces), tagged b1-<n>-<letter>
#   device_round_ab_at BATCH CONTEXT OPS ORDER ARGS_A ARGS_B
#                            the same at BATCH / CONTEXT, tagged b<BATCH>-<n>-<letter>
#   device_round_trace TAG ARGS...
#                            one batch-1 `glm5prof profile` (graphs, 2 traced steps; pool POOL_MIN, default 495,000
#                            tokens) into $W/TAG with ARGS, its trace.json kept gzipped
#   device_round_gpu_tests   every GPU test executable in $BIN, 4 at a time under 240 s each (tools/device_tests.sh),
#                            kernels_gpu_moe_grouped set aside for device_round_moe_grouped_alone; prints failures
#                            and the table
#   device_round_moe_grouped_alone
#                            kernels_gpu_moe_grouped's PairDownMatchesPerTokenBitwise alone (240 s)
#   device_round_test NAME TIMEOUT [GTEST ARGS...]
#                            one GPU test executable of $BIN under TIMEOUT into $W/NAME.log: prints its rc, gtest's
#                            PASSED / FAILED lines and the first failure lines; returns its rc
#   device_round_ncu_summary CSV
#                            per launch of an `ncu --csv --print-units base` file: id, kernel, grid, and whichever of
#                            gpu__time_duration.sum, dram__bytes_read.sum, lts__t_sector_hit_rate.pct and
#                            dram__throughput.avg.pct_of_peak_sustained_elapsed it holds
#   device_round_bench_moe   `glm5prof bench kernels --only moe` into $W/moe.json (90 s), then its expert rows (not the
#                            _pf / _grouped variants) and the copy rate: us, GB/s, fraction of copy, check
#   device_round_bench_mla TIMEOUT
#                            `glm5prof bench kernels --only mla --reps 20` into $W/mla.json under TIMEOUT, then its FP8
#                            wgmma rows, the copy and GEMM ceilings: B, heads, splits, us, TFLOP/s, roofline fraction
device_round_begin() {
  TAG=$1
  W=$OUT/$TAG
  mkdir -p "$W"
  tar xJf .device/pack.tar.xz -C .device
  export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
  BIN=$PWD/.device/bin
}
device_round_card() {
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
  local mib
  mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
  if (( ${mib:-0} < 100000 )); then export POOL_MIN=280000; echo "80 GB card: pool $POOL_MIN"; fi
}
device_round_layer_timeline() {
  awk '/^Layer timeline/{f=1} f&&/^\| /{print} f&&/^Top kernels/{exit}' "$1/report.md"
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
device_round_profile() {
  local tag=$1 b=$2 ctx=$3 ops=$4; shift 4
  local d=$W/$tag; mkdir -p "$d"
  local pool=$(( b * ( (ctx + 2 + 3 + 1 + 2 + 2 + 63) / 64 ) * 64 )); (( pool < ${POOL_MIN:-495000} )) && pool=${POOL_MIN:-495000}
  timeout 90 "$BIN/glm5prof" profile --model glm5 --kv-path fp8 --batch "$b" --context "$ctx" --pool-tokens $pool \
    --weights-dtype fp8 --steps 2 --warmup 2 --untraced-steps 3 --graph "$@" --out "$d" > "$d/log" 2>&1
  local rc=$?
  echo "$tag rc=$rc untraced $(python3 -c "import json;r=json.load(open('$d/report.json'));print(round(r['runs'][0]['timing']['untraced_step_us']/1000,3))" 2>/dev/null) ms"
  grep -E "^\| ($ops) \|" "$d/report.md" | sed 's/^/    /'
  rm -f "$d/trace.json"
}
device_round_ncu_summary() {
  python3 - "$1" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: sys.exit("no rows")
h = rows[0]; mi = h.index("Metric Name"); vi = h.index("Metric Value"); ni = h.index("ID"); ki = h.index("Kernel Name")
gi = h.index("Grid Size") if "Grid Size" in h else None
num = lambda s: float(s.replace(',', '')) if s else 0.0  # ncu writes thousands separators
by = {}
for r in rows[1:]:
    d = by.setdefault(r[ni], {'k': r[ki].split('(')[0].split('::')[-1][:34], 'g': r[gi] if gi is not None else ''})
    d[r[mi]] = num(r[vi])
names = {'gpu__time_duration.sum': ('us', 1e-3), 'dram__bytes_read.sum': ('DRAM read MB', 1e-6),
         'lts__t_sector_hit_rate.pct': ('L2 hit %', 1), 'dram__throughput.avg.pct_of_peak_sustained_elapsed': ('DRAM %', 1)}
for i, d in sorted(by.items(), key=lambda x: int(x[0])):
    vals = '  '.join(f"{lab} {d[m] * f:.1f}" for m, (lab, f) in names.items() if m in d)
    print(f"  id {i} {d['k']} {d['g']}  {vals}")
PY
}
device_round_gpu_tests() {
  export GLM5_BINARY_DIR=$BIN
  mkdir -p $W/alone && mv $BIN/kernels_gpu_moe_grouped $W/alone/
  timeout 300 tools/device_tests.sh $BIN $W/tests 4 240 > $W/tests.txt 2>&1; echo "tests rc=$?"
  sed -n '/==== failures ====/,/==== measured ====/p' $W/tests.txt | head -30
  sed -n '/==== table ====/,$p' $W/tests.txt
}
device_round_moe_grouped_alone() {
  timeout 240 $W/alone/kernels_gpu_moe_grouped --gtest_filter=GpuMoeGrouped.PairDownMatchesPerTokenBitwise > $W/moe_grouped.log 2>&1
  echo "moe_grouped PairDown rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/moe_grouped.log | tr '\n' ' ')"
}
device_round_ab() {
  device_round_ab_at 1 32768 "$@"
}
device_round_ab_at() {
  local bs=$1 ctx=$2 ops=$3 order=$4 a=$5 b=$6 r=0 x
  for x in $order; do
    r=$((r + 1))
    # shellcheck disable=SC2086  # ARGS_A / ARGS_B are flag lists
    if [ "$x" = A ]; then device_round_profile b$bs-$r-A "$bs" "$ctx" "$ops" $a
    else device_round_profile b$bs-$r-B "$bs" "$ctx" "$ops" $b; fi
  done
}
device_round_trace() {
  local d=$W/$1; shift; mkdir -p "$d"
  timeout 120 "$BIN/glm5prof" profile --model glm5 --kv-path fp8 --batch 1 --context 32768 --pool-tokens ${POOL_MIN:-495000} \
    --weights-dtype fp8 --steps 2 --warmup 2 --untraced-steps 3 --graph "$@" --out "$d" > "$d/log" 2>&1
  echo "trace $(basename "$d") rc=$? untraced $(python3 -c "import json;r=json.load(open('$d/report.json'));print(round(r['runs'][0]['timing']['untraced_step_us']/1000,3))" 2>/dev/null) ms"
  gzip -9 "$d/trace.json"
}
device_round_test() {
  local t=$1 to=$2; shift 2
  timeout "$to" "$BIN/$t" "$@" > "$W/$t.log" 2>&1
  local rc=$?
  echo "$t rc=$rc $(grep -E '^\[  (PASSED|FAILED)' "$W/$t.log" | tr '\n' ' ')"
  grep -hE "Failure|Expected|Which is|gather " "$W/$t.log" | head -6
  return $rc
}
device_round_bench_moe() {
  timeout 90 $BIN/glm5prof bench kernels --only moe --out $W/moe.json > $W/moe.txt 2> $W/moe.err
  echo "bench moe rc=$?"; tail -1 $W/moe.err
  python3 -c "
import json
for r in json.load(open('$W/moe.json')):
    if r['kernel'].startswith('moe_experts_') and not r['kernel'].endswith(('_pf', '_grouped')) or r['kernel'] == 'copy_d2d':
        print(r['kernel'], 'b', r['batch'], round(r['median_us'], 1), 'us', round(r['achieved_gbps']), 'GB/s', round(r.get('roofline_fraction', 0), 3), r.get('check', '')[:44])
" 2>&1 | head -40
}
device_round_bench_mla() {
  timeout "$1" $BIN/glm5prof bench kernels --only mla --reps 20 --out $W/mla.json > $W/mla.txt 2>&1
  echo "mla bench rc=$?"; tail -2 $W/mla.txt
  python3 -c "
import json
for r in json.load(open('$W/mla.json')):
    if r['kernel'].startswith('mla_decode_fp8_wgmma') or r['kernel'] in ('copy_d2d', 'gemm_bf16'):
        print(r['kernel'], 'B', r['batch'], 'H', r['heads'], 'S', r.get('splits'), '%.1f us' % r['median_us'], '%.1f TF/s' % (r.get('tflops', 0)), '%.1f%%' % (100*r['roofline_fraction']))
" 2>&1 | head -40
}
