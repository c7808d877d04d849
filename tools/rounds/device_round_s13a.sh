#!/usr/bin/env bash
# Session 13, call S13a: where batch 1's latency-bound kernels spend their time, each kernel measured alone.
# Nsight Compute serializes kernels, so a kernel's duration here excludes the time it waits in pdl_wait() for its
# predecessor (which the step's CUPTI records include when PDL starts it early).
#  1. the first ~110 kernels of one untraced decode step (B 1, 32K context, FP8 weights, fp8 path; eager): every op of
#     the three dense layers and the first MoE layers, gpu__time_duration each;
#  2. the batch-1 sparse MLA decode and its combine (mla_small_batch_probe's first variant, Auto) and the DSA top-k
#     with the Speed-of-Light / occupancy / warp-state sections.
# Usage: tools/device_pack.sh build-lead glm5prof mla_small_batch_probe; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13a
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
OPS=""
for o in attn.norm attn.qkv_a_proj attn.prologue attn.q_up_proj attn.indexer.weights_proj attn.indexer.rope \
         attn.indexer.score attn.indexer.topk attn.q_absorb attn.mla attn.v_unabsorb attn.o_proj mlp.norm \
         moe.router moe.route moe.experts mlp.gate_up mlp.down attn.rope attn.residual mlp.residual \
         attn.q_a_proj attn.kv_a_proj attn.q_b_proj attn.indexer.wq_b attn.indexer.wk moe.shared.gate_up moe.shared.down; do
  OPS="$OPS --nvtx-include $o/"
done
PROF="$BIN/glm5prof profile --model glm5 --kv-path fp8 --batch 1 --context 32768 --weights-dtype fp8 --warmup 1 \
  --untraced-steps 1 --steps 1 --out $W/prof"
timeout 240 $NCU --nvtx $OPS --cache-control none --clock-control none --metrics gpu__time_duration.sum \
  --launch-skip 0 --launch-count 110 --csv --print-units base $PROF > $W/step_kernels.csv 2> $W/step_kernels.err
echo "ncu step rc=$? lines=$(wc -l < $W/step_kernels.csv)"
tail -3 $W/step_kernels.err
python3 - "$W/step_kernels.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: sys.exit("no rows")
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ni = h.index("ID")
for r in rows[1:]:
    print(f"{r[ni]:>4} {float(r[vi].replace(',',''))/1000:8.2f} us  {r[ki][:110]}")
PY
SECT="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
timeout 120 $NCU --cache-control all --clock-control none -k regex:mla_decode -c 4 $SECT $BIN/mla_small_batch_probe \
  > $W/mla_b1_ncu.txt 2>&1; echo "ncu mla rc=$?"
grep -E "mla_decode|Duration|Memory Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Grid Size|Block Size|Warp Cycles Per Issued|Stall|Dynamic Shared" $W/mla_b1_ncu.txt | head -80
timeout 200 $NCU --nvtx --nvtx-include attn.indexer.topk/ --cache-control none --clock-control none -c 2 $SECT $PROF \
  > $W/topk_ncu.txt 2>&1; echo "ncu topk rc=$?"
grep -E "topk|Duration|Memory Throughput|Registers Per|Achieved Occupancy|Grid Size|Cluster|Warp Cycles Per Issued|Stall" $W/topk_ncu.txt | head -40
device_round_pack
