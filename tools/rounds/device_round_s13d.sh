#!/usr/bin/env bash
# Session 13, call S13d: instruction-level anatomy of batch 1's latency-bound kernels (one dense layer of the
# decode step, B 1, 32K context, FP8 weights, fp8 path, eager): Nsight Compute's SourceCounters, WarpStateStats,
# InstructionStats and LaunchStats for the kernels of attn.norm, attn.prologue, attn.indexer.score,
# attn.indexer.topk, attn.q_absorb, attn.mla, attn.v_unabsorb and mlp.norm; per-kernel SASS tables as CSV.
# Usage: tools/device_pack.sh build-lead glm5prof; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13d
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
OPS=""
for o in attn.norm attn.prologue attn.rope attn.indexer.score attn.indexer.topk attn.q_absorb attn.mla attn.v_unabsorb mlp.norm; do
  OPS="$OPS --nvtx-include $o/"
done
timeout 300 $NCU --nvtx $OPS --cache-control none --clock-control none -c 10 --import-source yes \
  --section SourceCounters --section WarpStateStats --section InstructionStats --section LaunchStats --section SpeedOfLight \
  -o $W/layer $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch 1 --context 32768 --weights-dtype fp8 \
  --warmup 1 --untraced-steps 1 --steps 1 --out $W/prof > $W/ncu.log 2>&1
echo "ncu rc=$?"; grep -c "==PROF== Profiling" $W/ncu.log
$NCU -i $W/layer.ncu-rep --page source --csv --print-source sass > $W/sass.csv 2> $W/sass.err; echo "sass rc=$? $(wc -l < $W/sass.csv)"
$NCU -i $W/layer.ncu-rep --page details --print-details all 2>&1 | grep -E "^  [a-z_:<>, 0-9A-Z]+\(|Duration|Warp Cycles Per Issued|Executed Instructions  |Grid Size|Block Size|Registers Per|Stall (Wait|Long|Short|Barrier|No Inst)|Elapsed Cycles|SM Active" > $W/details.txt
cat $W/details.txt | head -150
rm -rf $W/prof
device_round_pack
