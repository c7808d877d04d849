#!/usr/bin/env bash
# Device call S5a (2026-11-29, session 5): the TMA-fed FP8 GEMV's test and `glm5prof bench kernels --only
# linear` (it beside linear_fp8 at m = 1); the batch-1 decode step (FP8 weights, graph on) with the register-fed
# GEMV and with `--fp8-gemv tma`; then every GPU test of main after the review refactor (pdl_begin,
# validate_linear_group).
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared" GLM5_BINARY_DIR=$PWD/.device/bin
BIN=$PWD/.device/bin; W=$OUT/s5a; mkdir -p $W
timeout 100 $BIN/kernels_gpu_linear_fp8 --gtest_filter='GpuLinearFp8Tma.*' > $W/tma_test.log 2>&1; echo "tma test rc=$?"
grep -E "tma gemv|Failure|FAILED|OK \]|what|rel err|Expected|Which" $W/tma_test.log | head -30
timeout 150 $BIN/glm5prof bench kernels --only linear --out $W/linear.json > $W/linear.txt 2>&1; echo "bench rc=$?"
grep -E "linear_fp8 |linear_fp8_tma|linear_bf16 " $W/linear.txt | grep -vE "batch (8|16|32|64)" | head -40
for feed in regs tma; do
  BATCHES=1 WEIGHTS=fp8 GRAPHS=1 EXTRA="--fp8-gemv $feed" timeout 120 tools/decode_step_bench.sh $BIN/glm5prof /tmp/b1$feed > $W/step-b1-$feed.txt 2>&1; echo "b1 $feed rc=$?"
  cp /tmp/b1$feed/decode-step.json $W/decode-step-$feed.json 2>/dev/null
  cp /tmp/b1$feed/runs/*/report.md $W/report-b1-$feed.md 2>/dev/null
  python3 -c "
import json
for r in json.load(open('$W/decode-step-$feed.json')):
  if 'skipped' in r: continue
  print('$feed', r['weights_dtype'], 'b%d'%r['batch'], r['kv_path'], 'graph', int(r['graph']), '%.2f ms'%(r['step_us']/1e3), 'ratio %.2f'%r['ratio'], 'traced %+.1f%%'%r['overhead_pct'])"
  grep -E "attn.o_proj|moe.experts|attn.q_up_proj|attn.qkv_a_proj" $W/report-b1-$feed.md | head -8
done
timeout 330 tools/device_tests.sh $BIN $W/tests 4 240 > $W/tests.txt 2>&1; echo "tests rc=$?"
tail -40 $W/tests.txt
(cd $OUT && tar czf s5a.tar.gz s5a && rm -rf s5a)
