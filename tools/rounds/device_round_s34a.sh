#!/usr/bin/env bash
# Session 34, call S34a: why the MLA crossover is still 14% slower with CTA-scope remote arrivals (S33, H100: B 128 x
# 128 heads 262.0 against 228.9 us; WG1's "P . V" phase 3994 against 1317 cycles per tile). The probe now splits each
# consumer phase into the P . V and the buffer's release (PROBE 7 / 13). Builds: the library form (''), crossover
# (GLM5_PROBE_XO=1: the CTA-scope arrival), xorc (.release.cluster, the S32 form), xorl (.relaxed.cluster, no release:
# does the arrival stall on a fence?). Then the SASS around the crossover kernels' remote arrivals.
# Usage: tools/probe/build.sh build-lead; tools/probe/build.sh build-lead mla_wgmma_probe_xorc -DGLM5_MLA_XO_RELEASE_CLUSTER;
#        tools/probe/build.sh build-lead mla_wgmma_probe_xorl -DGLM5_MLA_XO_RELAXED;
#        tools/device_pack.sh build-lead mla_wgmma_probe mla_wgmma_probe_xorc mla_wgmma_probe_xorl;
#        run `bash THIS` with carry [".device"], timeout 300
set -u
. tools/device_round_lib.sh
device_round_begin s34a
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
for r in 1 2; do
  GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe > $W/probe-$r.txt 2>&1; echo "probe round $r rc=$?"
  for v in _xorc _xorl; do
    GLM5_PROBE_XO=1 GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe$v > $W/probe$v-$r.txt 2>&1; echo "probe$v round $r rc=$?"
  done
  GLM5_PROBE_XO=1 GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe > $W/probe_xo-$r.txt 2>&1; echo "probe_xo round $r rc=$?"
done
for r in 1 2; do for v in "" _xo _xorc _xorl; do echo "== probe$v round $r"
  grep -E 'B=128 H=128' -A4 $W/probe$v-$r.txt | grep -E 'B=|WG|producer'; done; done
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for v in "" _xorc _xorl; do
  $CUOBJ -sass $BIN/mla_wgmma_probe$v > $W/sass$v.txt 2>&1; echo "sass$v rc=$? $(wc -l < $W/sass$v.txt) lines"
done
gzip $W/sass*.txt
device_round_pack
