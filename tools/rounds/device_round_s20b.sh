#!/usr/bin/env bash
# Session 20, calls S20b and S20c (the same script; S20c after moving the shared expert's fork before the gate, with its own
# mlp.norm on the side stream, and the rank-form routing): the fused MoE gate (kernels/moe_gate.h, profile --moe-gate-fused on|off): mlp.norm, moe.router
# and moe.route as one launch at batch <= 4. Predicted: the chain from attn.o_proj's end to the routed experts' start
# drops from ~11.6 us (S20a trace) to ~5 us per MoE layer, -0.3 to -0.5 ms per batch-1 step.
#  tests: kernels_gpu_moe_gate (bitwise against the three launches, GLM-5 / DeepSeek-V3 shapes, B 1-4),
#  kernels_gpu_moe (the routing kernels after moving their warp body to moe_route.cuh), engine_gpu_graph (the fused
#  gate and the MoE forms bitwise), engine_gpu_fp8_weights and engine_gpu_golden (the golden checkpoint);
#  decode step batch 1, A (on) / B (off) in 8 processes, A B B A A B B A; one traced step with it on.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_moe_gate kernels_gpu_moe engine_gpu_graph
#        engine_gpu_fp8_weights engine_gpu_golden; .device/shared as in S19a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin ${TAG_OVERRIDE:-s20b}
export GLM5_BINARY_DIR=$BIN
for t in kernels_gpu_moe_gate kernels_gpu_moe engine_gpu_fp8_weights engine_gpu_golden; do
  timeout 240 $BIN/$t > $W/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/$t.log | tr '\n' ' ')"
done
grep -h "^moe_gate" $W/kernels_gpu_moe_gate.log
timeout 300 $BIN/engine_gpu_graph --gtest_filter='GraphGpu.MoeGate*:GraphGpu.MoePair*:GraphGpu.SharedExpert*:GraphGpu.GemvFold*' \
  > $W/gpu_graph.log 2>&1
echo "engine_gpu_graph (4 tests) rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/gpu_graph.log | tr '\n' ' ')"
grep -hE "Failure|Expected|Which is" $W/*.log | head -12
device_round_ab "mlp.norm|moe.router|moe.route|moe.experts|moe.shared" "A B B A A B B A" "--moe-gate-fused on" "--moe-gate-fused off"
device_round_trace b1-trace-A --moe-gate-fused on
device_round_pack
