#!/usr/bin/env bash
# Session 19, call S19d: the GEMV fold (EngineOptions::gemv_fold) with attn.rope folded into attn.q_up_proj too
# (LinearGroupParams::rope: the CTA computing a head's rope columns rotates them; bitwise the GEMV then the rope
# kernel). (1) The batch-1 step (GLM-5, FP8 weights, fp8 path, graphs, 32K), --gemv-fold on (A) / off (B), A B B A;
# predicted vs S19b's fold (norms only): a further -0.1 to -0.17 ms (attn.rope 172-178 us per step).
# (2) The batch-1 graph rows of issue 4's table: BATCHES=1 WEIGHTS=fp8 GRAPHS=1 tools/decode_step_bench.sh.
# (3) Every GPU test executable (tools/device_tests.sh, 4 at a time).
# Usage: tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; .device/shared as in S19a;
#        run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s19d
OPS="attn.norm|attn.q_a_norm|attn.qkv_a_proj|attn.q_up_proj|attn.rope|attn.indexer.score"
device_round_ab "$OPS" "A B B A" "--gemv-fold on" "--gemv-fold off"
device_round_step 1 fp8 1 200 "attn.q_up_proj|attn.rope"
device_round_gpu_tests
grep -h -E "group \+ output rope|gemv_fold on" $W/tests/*.log 2>/dev/null | grep -v "relative error [0-9.e-]*$" | head -20
grep -h -E "gemv_fold on vs off" $W/tests/*.log 2>/dev/null | sort -t' ' -k10 -g | tail -3
device_round_pack
