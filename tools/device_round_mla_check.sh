#!/usr/bin/env bash
# One device call checking and timing the wgmma MLA kernel (kernels/sm90a/mla_decode_wgmma.cu): gpu_mla_decode
# (REPEAT times: a repeat gives the bitwise FP8-row / BF16-row comparison more chances to catch a race), the quick
# MLA bench, the phase probes named in PROBES (tools/probe/build.sh BUILD NAME [-D...]), and with SANITIZE=1
# compute-sanitizer synccheck (96 heads, a partial second head block) and racecheck (B 8 / 64 heads, split-K), plus
# the named-barrier racecheck probe (tools/probe/named_barrier_racecheck.cu, modes 0-4) when it was packed.
# Calls made with it (each on the source of its commit; results in reports/2026-11-30-h200-kv-kernels.md and
# -mla-wgmma-probe.md):
#   S6d, S6e, S6g, S6h          REPEAT=1 SANITIZE=0   (session 6's producer variants)
#   S6m, S7a                    REPEAT=2 SANITIZE=1 PROBES=   (review mend; non-aligned named barriers)
#   S7b                         REPEAT=2 SANITIZE=1   (first bulk-copy FP8 feed)
#   S7c                         REPEAT=2 SANITIZE=1 PROBES="mla_wgmma_probe probe_p0"  (probe_p0: -DGLM5_MLA_WG_BULK_PREFETCH=0
#                               then the default; built with -DGLM5_MLA_WG_PREFETCH=0 in that commit)
#   S7d                         REPEAT=1 SANITIZE=0 PROBES="mla_wgmma_probe probe_int" (+ kernels_gpu_dequant; the integer
#                               decode and its test are in commit cea59ff's parent only)
#   S7h                         REPEAT=2 SANITIZE=1   (bulk feed v2: rope by TMA, codes only bulk-copied)
#   S8a, S8b, S8g, S8i          REPEAT=1-2 SANITIZE=1 (WG1 issues the code copies; S8i: the cluster merge)
#   S8c-S8e                     REPEAT=1 SANITIZE=0   (issue / rope variants; S8c PROBES="mla_wgmma_probe probe_cpa")
#   S9a                         REPEAT=1 SANITIZE=0 STEP_BATCHES=64 PROBES="mla_wgmma_probe probe_bf16io" (the decode step
#                               at batch 64 runs the cluster merge in a CUDA graph; probe_bf16io: -DGLM5_MLA_PROBE_BF16_IO=1)
#   S9b                         REPEAT=1 SANITIZE=0 PROBES="mla_wgmma_probe probe_first probe_bf16io probe_both ..." (not kept)
#   S9c                         REPEAT=1 SANITIZE=0 PROBES= STEP_BATCHES="1 8 32 128" STEP_WEIGHTS="bf16 fp8"
#                               STEP_GRAPHS="0 1" STEP_TIMEOUT=470 (issue 4's whole sweep on one build)
# Pack: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode [named_barrier_racecheck] <PROBES...>;
# run `bash THIS TAG` with carry [".device"].
set -u
TAG=${1:-mla}; REPEAT=${REPEAT:-2}; SANITIZE=${SANITIZE:-1}; PROBES=${PROBES-mla_wgmma_probe}
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/$TAG; mkdir -p $W
timeout 240 $BIN/kernels_gpu_mla_decode --gtest_repeat=$REPEAT > $W/mla_test.log 2>&1; echo "mla test x$REPEAT rc=$?"
grep -E "Failure|FAILED|PASSED" $W/mla_test.log | head; echo "wgmma checks: $(grep -c 'wgmma kernel:' $W/mla_test.log)"
grep -B2 -A8 -m2 "Failure" $W/mla_test.log | head -40
timeout 90 $BIN/glm5prof bench kernels --only mla --quick --reps 20 --out $W/mla.json > $W/mla.txt 2>&1; echo "mla bench rc=$?"
grep -E "^  mla_decode_(fp8|bf16)_wgmma" $W/mla.txt | head -12
for pb in $PROBES; do echo "== $pb"; timeout 60 $BIN/$pb > $W/$pb.txt 2>&1; echo "probe rc=$?"; grep -A5 -E "^B=(64 H=64|128 H=64|128 H=128)" $W/$pb.txt | grep -v "^--"; done
if [ -n "${STEP_BATCHES:-}" ]; then  # S9a: the decode step at batch 64 (the S = 2 cluster merge captured in a CUDA graph)
  BATCHES="$STEP_BATCHES" WEIGHTS="${STEP_WEIGHTS:-fp8}" GRAPHS="${STEP_GRAPHS:-1}" timeout ${STEP_TIMEOUT:-200} tools/decode_step_bench.sh $BIN/glm5prof $W/step > $W/step.txt 2>&1
  echo "step rc=$?"; grep -v "^batch" $W/step/bench.log | tail -n 4
  python3 tools/decode_step_summary.py $W/step/decode-step.json 2>&1 | tail -n 60
  rm -rf $W/step/runs/*/trace.json
fi
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ "$SANITIZE" = 1 ] && [ -n "$CS" ]; then
  if [ -x $BIN/named_barrier_racecheck ]; then
    for m in 0 1 2 3 4; do timeout 30 $CS --tool racecheck $BIN/named_barrier_racecheck $m 2>&1 | grep -E "mode|RACECHECK SUMMARY|ERROR SUMMARY"; done
  fi
  timeout 60 $CS --tool synccheck $BIN/kernels_gpu_mla_decode --gtest_filter='Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/30' > $W/synccheck.log 2>&1
  echo "synccheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $W/synccheck.log | head -3
  timeout 150 $CS --tool racecheck $BIN/kernels_gpu_mla_decode --gtest_filter='Shapes/GpuMlaDecode.MatchesCpuTwinAndPathsAgree/15' > $W/racecheck.log 2>&1
  echo "racecheck (B 8, 64 heads, split-K) rc=$?"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" $W/racecheck.log | head -3
  grep -oE "Race reported between (Read|Write) access at [^ ]+ in mla_decode_wgmma.cu:[0-9]+" $W/racecheck.log | sed 's/.*cu://' | sort | uniq -c | head
  grep -oE "and (Read|Write) access at .* in mla_decode_wgmma.cu:[0-9]+" $W/racecheck.log | sed 's/.*cu://' | sort | uniq -c | head
elif [ "$SANITIZE" = 1 ]; then echo "no compute-sanitizer"; fi
(cd $OUT && tar czf $TAG.tar.gz $TAG && rm -rf $TAG)
