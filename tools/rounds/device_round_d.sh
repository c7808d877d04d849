#!/usr/bin/env bash
# Device call D (2026-11-29 session 2): decode-step benchmark (graph round 2) and the kernel benchmark.
set -u; tar xJf .device/pack.tar.xz -C .device; export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
date +%T
echo "rc=$?"
echo "=== decode_step_bench.sh: batches 1 32, weights bf16 fp8, graph 0 1, context 32768, 3 KV paths ==="
date +%T
BATCHES="1 32" WEIGHTS="bf16 fp8" timeout 420 tools/decode_step_bench.sh .device/bin/glm5prof /tmp/graph-bench2 > $OUT/bench.txt 2>&1
echo "rc=$?"
tail -n 45 $OUT/bench.txt
cp /tmp/graph-bench2/decode-step.json $OUT/ 2>/dev/null
for d in /tmp/graph-bench2/runs/b1-c32768-wfp8-graph1 /tmp/graph-bench2/runs/b1-c32768-wbf16-graph0; do
  echo "--- $d"; tail -n 6 $d/log
  grep -E "Tracing overhead|Step floor|CUDA graph replays|graph capture|kernel records|INCOMPLETE|have no kernel record" $d/report.md | head -24
done
head -c 30000 /tmp/graph-bench2/runs/b1-c32768-wfp8-graph1/report.md > $OUT/b1-fp8-graph1.report.md 2>/dev/null
head -c 20000 /tmp/graph-bench2/runs/b1-c32768-wbf16-graph0/report.md > $OUT/b1-bf16-graph0.report.md 2>/dev/null
head -c 12000 /tmp/graph-bench2/runs/b32-c32768-wfp8-graph1/report.md > $OUT/b32-fp8-graph1.report.md 2>/dev/null
date +%T
timeout 150 .device/bin/glm5prof bench kernels --out $OUT/kv-kernels.json > $OUT/bench-kernels.txt 2>&1; echo "bench rc=$?"; sed -n "/^kernel /,\$p" $OUT/bench-kernels.txt
