#!/usr/bin/env bash
# Session 34, call S34b: the MLA crossover moving the partner's half-tile by cp.async.bulk shared::cta ->
# shared::cluster (4 KB per panel, after each round) instead of per-thread st.async (S34a: WG1's P . V 3.9k against
# 1.3k cycles per tile; the kernel 14-16% slower than without crossover). 1. the MLA GPU tests (crossover bitwise as
# without it); 2. the phase probe, fp16 operands, without and with crossover, twice; 3. the quick MLA bench.
# Usage: (cd build-lead && make kernels_gpu_mla_decode glm5prof); tools/probe/build.sh build-lead;
#        tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode mla_wgmma_probe;
#        run `bash THIS` with carry [".device"], timeout 400
set -u
. tools/device_round_lib.sh
device_round_begin s34b
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
device_round_test kernels_gpu_mla_decode 150 --gtest_filter='Shapes/*:GpuMlaDecodeKernelChoice*'
grep -E "crossover" $W/kernels_gpu_mla_decode.log | sort | uniq -c | head -4
for r in 1 2; do
  GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe > $W/probe-$r.txt 2>&1; echo "probe round $r rc=$?"
  GLM5_PROBE_XO=1 GLM5_PROBE_F16=1 timeout 40 $BIN/mla_wgmma_probe > $W/probe_xo-$r.txt 2>&1; echo "probe_xo round $r rc=$?"
done
for r in 1 2; do for v in "" _xo; do echo "== probe$v round $r"
  grep -E 'B=128 H=128|B=64 H=256' -A4 $W/probe$v-$r.txt | grep -E 'B=|WG|producer'; done; done
timeout 120 $BIN/glm5prof bench kernels --only mla --quick --reps 20 --out $W/mla.json > $W/mla.txt 2>&1
echo "mla bench rc=$?"; grep -E "^ *mla_decode_fp8_wgmma_f16" $W/mla.txt | head -30
device_round_pack
