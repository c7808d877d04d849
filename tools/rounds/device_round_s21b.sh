#!/usr/bin/env bash
# Session 21, call S21b: (1) the L2 rider as plain loads (--unabsorb-l2-prefetch loads: attn.mla's combine CTAs load
# W_UV, 16.8 MB, before their PDL wait; S21a: as cp.async.bulk.prefetch.L2 requests the unabsorb still read all
# 16.9 MB from DRAM), its GPU test, an A/B against off (4 processes) and Nsight Compute on the unabsorb GEMV
# (DRAM bytes, L2 hit rate) with loads and off; (2) issue 4's FP8-weight rows on this session's defaults (session
# 20's --moe-shared-late on): BATCHES="1 8 32 128" WEIGHTS=fp8 GRAPHS="1 0" tools/decode_step_bench.sh.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode; .device/shared as in S21a;
#        run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s21b
timeout 200 $BIN/kernels_gpu_mla_decode --gtest_filter='GpuMlaDecodeSplit.*' > $W/mla.log 2>&1
echo "kernels_gpu_mla_decode GpuMlaDecodeSplit.* rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/mla.log | tr '\n' ' ')"
grep -hE "Failure|Expected|Which is" $W/*.log | head -8
device_round_ab "attn.mla|attn.v_unabsorb|attn.o_proj" "A B B A" "--unabsorb-l2-prefetch loads" "--unabsorb-l2-prefetch off"
mkdir -p $W/rider && mv $W/b1-* $W/rider/
for x in loads off; do
  timeout 150 ncu --csv --print-units base --cache-control none --clock-control none --kernel-name regex:mla_unabsorb_gemv \
    --launch-skip 20 --launch-count 4 --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct \
    $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch 1 --context 32768 --pool-tokens 495000 --weights-dtype fp8 \
    --steps 1 --warmup 1 --untraced-steps 1 --unabsorb-l2-prefetch $x --out $W/ncu-$x > $W/ncu-$x.csv 2> $W/ncu-$x.err
  echo "ncu unabsorb, rider $x: rc=$?"; device_round_ncu_summary $W/ncu-$x.csv
done
device_round_step "1 8 32 128" fp8 "1 0" 360 "attn.mla|attn.v_unabsorb|moe.experts"
device_round_pack
