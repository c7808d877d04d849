#!/usr/bin/env bash
# Session 17, call S17d: the batch-1 FP8 MoE pair path as one persistent launch (MoeExpertsParams::pair_sync,
# profile --moe-fused on). S17c: the two kernels run within ~6% of a math-free read of their bytes in their access
# pattern at their occupancy (read_rows: 58.9 + 34.4 us), and a 192 / 96 MiB read in one launch reaches only 84% /
# 75% of copy: what is left is each launch's ramp and tail. Fused, the down tiles' first loads overlap the last
# gate_up tiles. Predicted: ~5-8 us per MoE layer (0.4-0.6 ms per batch-1 step), bench 99 -> ~92 us.
#  tests: GpuMoeFp8 (the three forms bitwise, sync words back to zero), GraphGpu.MoePairForms* (logits bitwise);
#  bench kernels --only moe-pair; decode step batch 1, --moe-fused on (A) / off (B), A B B A.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_linear_fp8 engine_gpu_graph; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s17d
timeout 100 $BIN/kernels_gpu_linear_fp8 --gtest_filter='GpuMoeFp8.*' > $W/gpu_moe_fp8.log 2>&1; echo "GpuMoeFp8 rc=$?"
timeout 150 $BIN/engine_gpu_graph --gtest_filter='GraphGpu.MoePairForms*' > $W/gpu_graph_forms.log 2>&1; echo "GraphGpu.MoePairForms rc=$?"
grep -hE "^\[  (PASSED|FAILED) |Failure|Expected|Which is|not left" $W/gpu_moe_fp8.log $W/gpu_graph_forms.log | head -12
timeout 150 $BIN/glm5prof bench kernels --only moe-pair --out $W/moe_pair.json > $W/moe_pair.txt 2> $W/moe_pair.err
echo "bench rc=$?"; tail -1 $W/moe_pair.err
python3 - $W/moe_pair.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    if r["kernel"] == "copy_d2d" or r["kernel"].startswith("moe_experts") or r["kernel"] == "read_rows":
        print(f'{r["kernel"]:28} {r["bytes"]/1e6:8.1f} MB {r["median_us"]:8.1f} us {r["achieved_gbps"]:6.0f} GB/s {r["check"][-60:]}')
PY
OPS="moe.experts|moe.shared"
r=0; for x in A B B A; do r=$((r + 1))
  if [ $x = A ]; then device_round_profile b1-$r-A 1 32768 "$OPS" --moe-fused on; else device_round_profile b1-$r-B 1 32768 "$OPS" --moe-fused off; fi
done
device_round_pack
