#!/usr/bin/env bash
# Session 36, call S36b: where attn.qkv_a_proj's time goes at batch 1. S35a's layer timeline (H100, graphs, FP8
# weights, cluster top-k) has it adding 16.0 us to every layer for ~17 MB of FP8 weights (5.6 us at the card's copy
# rate), the largest excess of the layer chain after the top-k. Three views:
#   1. one traced batch-1 step with its trace (where qkv_a starts and ends against the previous layer's last kernel,
#      i.e. how much of its 16 us is a wait for that kernel);
#   2. Nsight Compute on the step's batch-1 GEMVs (eager, serialized: each kernel's own time, DRAM bytes, stalls);
#   3. the step with the batch-1 norm fold off (--gemv-fold off: attn.norm its own kernel, qkv_a the plain GEMV), A/B.
# Usage: (cd build-lead && make glm5prof); tools/device_pack.sh build-lead glm5prof; run `bash THIS` with carry
#        [".device"], timeout 600
set -u
. tools/device_round_lib.sh
device_round_begin s36b
device_round_card
device_round_trace b1-trace
device_round_layer_timeline $W/b1-trace | head -24
M=gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,sm__inst_issued.avg.per_cycle_active,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio
timeout 200 ncu --csv --print-units base --cache-control none --clock-control none -k regex:'linear_fp8_gemv_vec' \
  --launch-skip 60 --launch-count 12 --metrics $M \
  $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch 1 --context 32768 --pool-tokens ${POOL_MIN:-495000} \
  --weights-dtype fp8 --steps 1 --warmup 1 --untraced-steps 1 --out $W/ncu > $W/ncu.csv 2> $W/ncu.err
echo "ncu rc=$?"; grep -E "==PROF==|rror" $W/ncu.err | head -3
python3 tools/ncu_stalls.py $W/ncu.csv 1
device_round_ab "attn.qkv_a_proj|attn.norm|attn.q_up_proj" "A B" "--gemv-fold off" "--gemv-fold on"
for r in b1-1-A b1-2-B; do echo "== $r"; device_round_layer_timeline $W/$r | head -8; done
device_round_pack
