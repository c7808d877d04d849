#!/usr/bin/env bash
# Session 15, call S15b: the tensor-core absorb kernels with every warp busy at batch 8 and 32 (NG warps per m-tile) and the
# next 64 k's activation loads in flight during the current products (kernels/mla_absorb.cu). Same steps as S15a
# (tools/rounds/device_round_s15a.sh), the decode step in the order A B A (A: --absorb-tc on, B: off).
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_absorb; run `bash THIS`, carry [".device"]
# (S15_TAG names the output folder: tools/rounds/device_round_s15c.sh runs this body as s15c.)
set -u
. tools/device_round_lib.sh
device_round_begin ${S15_TAG:-s15b}
timeout 120 $BIN/kernels_gpu_mla_absorb > $W/gpu_mla_absorb.log 2>&1; echo "kernels_gpu_mla_absorb rc=$?"
grep -E "Failure|FAILED|PASSED" $W/gpu_mla_absorb.log | head -8
grep -E "^  tc:" $W/gpu_mla_absorb.log | sort -k5 -g | tail -3
timeout 150 $BIN/glm5prof bench kernels --only absorb --out $W/absorb.json > $W/absorb.txt 2> $W/absorb.err
echo "bench rc=$?"; tail -3 $W/absorb.err; awk '/absorb/ {printf "%s B%s H%s %s us; ", $1, $2, $3, $(NF-3)} /_tc/ {print ""}' $W/absorb.txt
OPS="attn.q_absorb|attn.v_unabsorb|attn.mla|attn.o_proj"
for spec in "8 32768" "32 32768" "128 8192"; do
  set -- $spec
  r=0; for x in A B A; do r=$((r + 1))
    if [ $x = A ]; then device_round_profile b$1-$r-A $1 $2 "$OPS"; else device_round_profile b$1-$r-B $1 $2 "$OPS" --absorb-tc off; fi
  done
done
device_round_pack
