#!/usr/bin/env bash
# Session 28, call S28d. The fp16-operand MLA form's dequantization two ways, phase probe only (S28c's load-ahead
# reverted): the e4m3 -> fp16x2 convert (cvt.rn.f16x2.e4m3x2, as in the library) against integer operations
# (byte permute, and, add, shift: e4m3x2_bits_mul_f16x2, probe_int built with -DGLM5_MLA_F16_INT=1); the bf16 form
# beside them. The probe's rope is now bf16 in [-1, 1], so its check line compares the fp16 forms too.
# Usage: tools/device_pack.sh build-lead mla_wgmma_probe probe_int
set -u
. tools/device_round_lib.sh
device_round_begin s28d
for v in bf16 f16 int; do
  case $v in
    bf16) timeout 30 $BIN/mla_wgmma_probe > $W/probe_$v.txt 2>&1 ;;
    f16) GLM5_PROBE_F16=1 timeout 30 $BIN/mla_wgmma_probe > $W/probe_$v.txt 2>&1 ;;
    int) GLM5_PROBE_F16=1 timeout 30 $BIN/probe_int > $W/probe_$v.txt 2>&1 ;;
  esac
  echo "probe $v rc=$?"
done
paste -d'\n' $W/probe_bf16.txt $W/probe_f16.txt $W/probe_int.txt | grep -E 'B=|producer|WG0|check' | head -60
device_round_pack
