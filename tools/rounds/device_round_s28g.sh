#!/usr/bin/env bash
# Session 28, call S28g. The FP8 bulk feed's producers ask L2 for tile i + 2's rows at the top of tile i (per-thread
# prefetch.global.L2, GLM5_MLA_WG_FP8_PREFETCH, default on in mla_wgmma_probe) against the same build without
# (probe_p0, -DGLM5_MLA_WG_FP8_PREFETCH=0): S28b's probe reads the loop as a latency chain (WG1's P . V of tile i ->
# tile i + 2's code copies -> their HBM latency -> dequantization -> Q . K^T). Predicted: copies and scale / rope
# loads that hit L2 shorten it by ~1-1.5k cycles per two tiles, -5..15% at batch 64-128. Probe only, both operand forms.
# Result (H100): slower everywhere (fp16 form B 128 x 64 heads 158.2 against 129.0 us, B 128 x 128 256.3 against
# 228.9): reverted; the prefetch code is in no commit (kernels/sm90a/mla_decode_wgmma.cu of S28g's build only).
# Usage: tools/device_pack.sh build-lead mla_wgmma_probe probe_p0
set -u
. tools/device_round_lib.sh
device_round_begin s28g
for v in p0 p1; do
  exe=$BIN/mla_wgmma_probe; [ $v = p0 ] && exe=$BIN/probe_p0
  timeout 30 $exe > $W/probe_${v}_bf16.txt 2>&1; echo "probe $v bf16 rc=$?"
  GLM5_PROBE_F16=1 timeout 30 $exe > $W/probe_${v}_f16.txt 2>&1; echo "probe $v f16 rc=$?"
done
for f in bf16 f16; do
  echo "== $f operands: without / with the L2 prefetch"
  paste -d'\n' $W/probe_p0_$f.txt $W/probe_p1_$f.txt | grep -E 'B=|producer|WG0|WG1|check' | head -40
done
device_round_pack
