#!/usr/bin/env bash
# Session 13, call S13h: the wgmma MLA kernel's Q prologue with more loads in flight (load_q kUnroll 2 -> 6 / 9: the
# 18 chunks per consumer thread in 3 / 2 rounds instead of 9; session 9 measured the prologue at 11-15k cycles per
# CTA and showed it was not Q's bytes). `glm5prof bench kernels --only mla` of the three builds (each checks every
# variant against the CPU twin before timing it), alternating, then FlashMLA built from source beside them.
# Usage: tools/device_pack.sh build-lead glm5prof_u2 glm5prof_u6 glm5prof_u9; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13h
for v in u2 u6 u9 u2 u6; do
  timeout 150 $BIN/glm5prof_$v bench kernels --only mla --reps 20 --out $W/mla_$v.json > $W/mla_$v.txt 2>&1
  echo "== $v rc=$?"
  python3 -c "
import json,sys
for r in json.load(open('$W/mla_$v.json')):
    if r['kernel'] in ('mla_decode_fp8_wgmma','mla_decode_fp8') and r['batch'] in (1,8,32,64,128):
        print(r['kernel'], 'B', r['batch'], 'H', r['heads'], 'sq', r.get('s_q',1), 'S', r.get('splits'), '%.1f us' % r['median_us'], '%.1f%%' % (100*r['roofline_fraction']))
"
done
OUT=$W/flashmla FLASHMLA_BUDGET_S=165 FLASHMLA_BENCH_S=60 FLASHMLA_BENCH_ARGS="--batches 1,64,128 --reps 20" \
  timeout 170 bash tools/device_flashmla.sh > $W/flashmla_run.txt 2>&1; echo "flashmla rc=$?"
grep -E "^ +shared|^per_query" $W/flashmla/flashmla.txt 2>/dev/null | head -20 || tail -5 $W/flashmla_run.txt
device_round_pack
