#!/usr/bin/env bash
# Session 15, call S15d: the final build's GPU tests and issue 4's record.
#  1. every GPU test executable, 4 at a time under 240 s each (tools/device_tests.sh; kernels_gpu_moe_grouped only its
#     PairDownMatchesPerTokenBitwise test, alone);
#  2. the decode step at batch 1, 8, 32 (context 32768) and 128 (8192), FP8 weights, graphs on, the three KV paths
#     (defaults: attn.q_absorb / attn.v_unabsorb on tensor cores, FP8 weight dequantization in vector form), then
#     batch 128 with --absorb-tc off in the same call;
#  3. the batch-128 runs' dtype-cast finding (the FP8 weight dequantization's share of the step).
# Usage: tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s15d
device_round_gpu_tests
BATCHES="1 8 32 128" WEIGHTS=fp8 GRAPHS=1 timeout 360 tools/decode_step_bench.sh "$BIN/glm5prof" "$W/step" > "$W/step.txt" 2>&1
echo "sweep rc=$?"; python3 tools/decode_step_summary.py "$W/step/decode-step.json" 2>&1 | tail -n 14
for d in "$W"/step/runs/b128-*fp8*/ "$W"/step/runs/b32-*fp8*/; do
  [ -f "$d/report.md" ] && { echo "== $d"; grep -oE "Dtype-cast kernels .{0,40}take [0-9.]+ us per step \([0-9.]+% of [0-9.]+ us\)" "$d/report.md" | sed 's/(attn.*) //' | head -2; }
done
OPS="attn.q_absorb|attn.v_unabsorb|attn.o_proj|attn.q_b_proj|mlp.gate_up|mlp.down|moe.shared.gate_up|moe.shared.down"
device_round_profile b128-absorb-off 128 8192 "$OPS" --absorb-tc off
device_round_profile b128-default 128 8192 "$OPS"
rm -rf "$W"/step*/runs/*/trace.json
device_round_moe_grouped_alone
device_round_pack
