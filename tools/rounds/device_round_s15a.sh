#!/usr/bin/env bash
# Session 15, call S15a: attn.q_absorb / attn.v_unabsorb on the split-BF16 tensor-core kernels (kernels/mla_absorb.cu,
# tc_gemm_kernel). S14g's op tables: the fp32-FMA tiled kernels took 17.6 + 14.3 ms of the batch-128 step, 5.1 + 3.9
# at batch 32, 1.9 + 1.9 at batch 8, against a byte floor of ~8 + 10 us per layer at batch 128 (0.65 + 0.77 ms).
#  1. kernels_gpu_mla_absorb (every path incl. tc against the CPU twin, GLM-5 and odd shapes);
#  2. bench kernels --only absorb (dispatch / naive / tiled / gemv / tc at H 64 and 16, B 1..128);
#  3. the decode step, --absorb-tc on (A, the new default) against off (B), order A B B A, batch 8 and 32 at context
#     32768, batch 128 at 8192.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_absorb; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s15a
timeout 120 $BIN/kernels_gpu_mla_absorb > $W/gpu_mla_absorb.log 2>&1; echo "kernels_gpu_mla_absorb rc=$?"
grep -E "Failure|FAILED|PASSED|Expected|Which is|seed" $W/gpu_mla_absorb.log | head -20
grep -E "^  tc:" $W/gpu_mla_absorb.log | sort -k5 -g | tail -3
timeout 150 $BIN/glm5prof bench kernels --only absorb --out $W/absorb.json > $W/absorb.txt 2> $W/absorb.err
echo "bench rc=$?"; tail -3 $W/absorb.err; grep -E "absorb" $W/absorb.txt | head -80
OPS="attn.q_absorb|attn.v_unabsorb|attn.mla|attn.o_proj"
for spec in "8 32768" "32 32768" "128 8192"; do
  set -- $spec
  r=0; for x in A B B A; do r=$((r + 1))
    if [ $x = A ]; then device_round_profile b$1-$r-A $1 $2 "$OPS"; else device_round_profile b$1-$r-B $1 $2 "$OPS" --absorb-tc off; fi
  done
done
device_round_pack
