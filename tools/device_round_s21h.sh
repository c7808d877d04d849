#!/usr/bin/env bash
# Session 21, call S21h: after the review mend (one combine instance per L2-rider form: the default combine back to 40
# registers), the MLA split tests (the rider, both forms, bitwise) and four batch-1 steps on the final defaults.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode; .device/shared as in S21a;
#        run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s21h
timeout 100 $BIN/kernels_gpu_mla_decode --gtest_filter='GpuMlaDecodeSplit.*:GpuMlaDecode/*' > $W/mla.log 2>&1
echo "kernels_gpu_mla_decode rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/mla.log | tr '\n' ' ')"
for r in 1 2 3 4; do device_round_profile b1-$r 1 32768 "attn.mla|attn.v_unabsorb"; done
device_round_pack
