#!/usr/bin/env bash
# Session 34, call S34d: an L2 stage in front of the MLA's two-buffer code ring. 1. tools/probe/gather_probe.cu: the
# code gather alone (64 random 512-byte rows per tile, D tiles in flight per SM; bulk, ldg, bulk + L2 prefetch);
# 2. the phase probe, fp16 operands, twice each: the library form (''), WG1's idle lanes prefetching rows into L2
# 1 / 2 / 3 tiles ahead of the codes it issues next (GLM5_MLA_WG1_PF), and pf2 with crossover (GLM5_PROBE_XO=1).
# Usage: tools/probe/build.sh build-lead; for k in 1 2 3; do tools/probe/build.sh build-lead mla_wgmma_probe_pf$k
#        -DGLM5_MLA_WG1_PF=$k; done; nvcc -std=c++20 -O3 -arch=sm_90a -I. -Isrc tools/probe/gather_probe.cu
#        build-lead/libglm5_common.a -o build-lead/gather_probe;
#        tools/device_pack.sh build-lead gather_probe mla_wgmma_probe mla_wgmma_probe_pf1 mla_wgmma_probe_pf2
#        mla_wgmma_probe_pf3; run `bash THIS` with carry [".device"], timeout 300
set -u
. tools/device_round_lib.sh
device_round_begin s34d
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
timeout 60 $BIN/gather_probe > $W/gather.txt 2>&1; echo "gather rc=$?"; cat $W/gather.txt
for r in 1 2; do
  for v in "" _pf1 _pf2 _pf3; do
    GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe$v > $W/probe$v-$r.txt 2>&1; echo "probe$v round $r rc=$?"
  done
  GLM5_PROBE_XO=1 GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe_pf2 > $W/probe_pf2xo-$r.txt 2>&1
  echo "probe_pf2xo round $r rc=$?"
done
for r in 1 2; do for v in "" _pf1 _pf2 _pf3 _pf2xo; do echo "== probe$v round $r"
  grep -E '^B=' $W/probe$v-$r.txt; done; done
for v in "" _pf2; do echo "== probe$v round 1, B 128 x 64"; grep -E '^B=128 H=64' -A4 $W/probe$v-1.txt | grep -E 'WG|producer'; done
device_round_pack
