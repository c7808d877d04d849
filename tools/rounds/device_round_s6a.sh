#!/usr/bin/env bash
# Prepared in session 5 for the next session's first device call (not yet run): the wgmma building block
# (kernels/wgmma.cuh: Q.K^T-style and P.V-style BF16 products from swizzled shared memory) and the TMA GEMV's
# box-shape sweep (box_rows 256 / 128 / 64), then the batch-1 step with each GEMV feed.
#   tools/device_pack.sh build-lead glm5prof kernels_gpu_wgmma kernels_gpu_linear_fp8; run with carry [".device"]
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared" GLM5_BINARY_DIR=$PWD/.device/bin
BIN=$PWD/.device/bin; W=$OUT/s6a; mkdir -p $W
timeout 60 $BIN/kernels_gpu_wgmma > $W/wgmma.log 2>&1; echo "wgmma rc=$?"
grep -E "wgmma m64|Failure|FAILED|OK \]|what" $W/wgmma.log | head -20
timeout 60 $BIN/kernels_gpu_linear_fp8 --gtest_filter='GpuLinearFp8Tma.*' > $W/tma_test.log 2>&1; echo "tma test rc=$?"
grep -E "tma gemv|Failure|FAILED|OK \]|what" $W/tma_test.log | head -30
timeout 150 $BIN/glm5prof bench kernels --only linear --out $W/linear.json > $W/linear.txt 2>&1; echo "bench rc=$?"
grep -E "^  linear_fp8 |linear_fp8_tma" $W/linear.txt | grep -E "B=1 " | head -48
for feed in regs tma; do
  BATCHES=1 WEIGHTS=fp8 GRAPHS=1 EXTRA="--fp8-gemv $feed" timeout 120 tools/decode_step_bench.sh $BIN/glm5prof /tmp/b1$feed > $W/step-b1-$feed.txt 2>&1; echo "b1 $feed rc=$?"
  cp /tmp/b1$feed/decode-step.json $W/decode-step-$feed.json 2>/dev/null
  python3 -c "
import json
for r in json.load(open('$W/decode-step-$feed.json')):
  if 'skipped' in r: continue
  print('$feed', r['weights_dtype'], 'b%d'%r['batch'], r['kv_path'], 'graph', int(r['graph']), '%.2f ms'%(r['step_us']/1e3), 'ratio %.2f'%r['ratio'])"
done
(cd $OUT && tar czf s6a.tar.gz s6a && rm -rf s6a)
