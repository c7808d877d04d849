#!/usr/bin/env bash
# Session 25, call S25d. S25c: the TMA-fed FP8 experts (--moe-wgmma on) in the bench 88.8% / 93.8% / 90.3% of copy at
# batch 8 / 32 / 128 (mma.sync 84.5 / 92.9 / 87.1%); in the step (A B B A, graphs) batch 128 229.8 / 230.1 ms against
# 238.3 / 238.3, batch 8 59.36 against 60.93, batch 32 141.61 against 143.16. Since: (1) the slot-row quantization
# one CTA per (expert, column block) instead of per expert (it chained ~24 L2 round trips per warp at batch 128);
# (2) gate_up's k split in two where the tiles per CTA are few (batch 8: 13.3 tiles per CTA, the longest 14: ~5% of
# gate_up), each half adding its g / u sums into zeroed scratch. Predicted: batch 8 ~-3% (554 -> ~535 us), batch 32
# ~-1%, batch 128 (unsplit) ~-1% (the quantization).
# The GPU test (both splits, twice: bitwise), the bench (_wgmma = the plan's split, _wgmma_k1 / _k2 forced), and
# ncu's duration of each wgmma-path kernel at batch 128 (the check runs of the three variants).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_grouped; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s25d
device_round_test kernels_gpu_moe_grouped 240 --gtest_filter='*Wgmma*'; t=$?
grep -E "^moe fp8 wgmma" $W/kernels_gpu_moe_grouped.log
if [ $t != 0 ]; then device_round_pack; exit 0; fi
timeout 150 $BIN/glm5prof bench kernels --only moe --out $W/moe.json > $W/moe.txt 2> $W/moe.err
echo "bench moe rc=$?"; tail -1 $W/moe.err
python3 -c "
import json
for r in json.load(open('$W/moe.json')):
    if r['kernel'].startswith('moe_experts_fp8') and r['batch'] > 1 and not r['kernel'].endswith(('_pf', '_grouped')):
        print(r['kernel'], 'b', r['batch'], round(r['median_us'], 1), 'us', round(r['achieved_gbps']), 'GB/s', round(r.get('roofline_fraction', 0), 3), r.get('check', '')[:48])
" 2>&1 | head -40
# batch 8 and 32 come first: 3 variants x (1 check + 2 reps) x 4 wgmma-path kernels each = 72 launches skipped
timeout 200 ncu --kernel-name-base demangled --kernel-name regex:moe_wgmma --launch-skip 72 --launch-count 12 \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct --csv --print-units base \
  $BIN/glm5prof bench kernels --only moe --reps 2 --warmup 0 --out $W/ncu-moe.json > $W/ncu.csv 2> $W/ncu.err
echo "ncu rc=$?"
python3 - "$W/ncu.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index('Kernel Name'); mi = h.index('Metric Name'); vi = h.index('Metric Value'); ii = h.index('ID')
out = {}
for r in rows[1:]:
    out.setdefault(r[ii], {'k': r[ki][:48]})[r[mi]] = r[vi]
for i, d in sorted(out.items(), key=lambda x: int(x[0])):
    print(i, d['k'], 'us', round(float(d.get('gpu__time_duration.sum', 0)) / 1e3, 1), 'GB read', round(float(d.get('dram__bytes_read.sum', 0)) / 1e9, 3), 'L2 hit', d.get('lts__t_sector_hit_rate.pct'))
PY
device_round_pack
