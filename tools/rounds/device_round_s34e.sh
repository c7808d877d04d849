#!/usr/bin/env bash
# Session 34, call S34e: the MLA's codes by 16-byte cp.async (LDGSTS) instead of cp.async.bulk per row. S34d's gather
# probe (H100) had one tile in flight per SM take 2.70 us per tile by cp.async.bulk and 1.99 us by __ldg into registers;
# the MLA's ring keeps about one tile in flight. 1. gather_probe again, now with its ldgsts form; 2. the phase probe,
# fp16 operands, twice each: the library form (''), GLM5_MLA_CODES_LDGSTS (_lsts) and it with crossover (_lstsxo),
# with their check lines.
# Usage: tools/probe/build.sh build-lead; tools/probe/build.sh build-lead mla_wgmma_probe_lsts -DGLM5_MLA_CODES_LDGSTS;
#        nvcc -std=c++20 -O3 -arch=sm_90a -I. -Isrc tools/probe/gather_probe.cu build-lead/libglm5_common.a
#        -o build-lead/gather_probe; tools/device_pack.sh build-lead gather_probe mla_wgmma_probe mla_wgmma_probe_lsts;
#        run `bash THIS` with carry [".device"], timeout 240
set -u
. tools/device_round_lib.sh
device_round_begin s34e
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
timeout 60 $BIN/gather_probe > $W/gather.txt 2>&1; echo "gather rc=$?"; grep -E "form|128 " $W/gather.txt
for r in 1 2; do
  for v in "" _lsts; do
    GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe$v > $W/probe$v-$r.txt 2>&1; echo "probe$v round $r rc=$?"
  done
  GLM5_PROBE_XO=1 GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe_lsts > $W/probe_lstsxo-$r.txt 2>&1
  echo "probe_lstsxo round $r rc=$?"
done
for r in 1 2; do for v in "" _lsts _lstsxo; do echo "== probe$v round $r"; grep -E '^B=|check' $W/probe$v-$r.txt; done; done
for v in "" _lsts; do echo "== probe$v round 1, B 128 x 64"; grep -E '^B=128 H=64' -A4 $W/probe$v-1.txt | grep -E 'WG|producer'; done
device_round_pack
