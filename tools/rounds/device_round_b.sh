#!/usr/bin/env bash
# Device call B (2026-11-29 session 2): kernel tests with timing rows one at a time (kv_cast tuning
# sweep, indexer, top-k, MLA decode, FP8 linear incl. cuBLASLt block-scaled), the kernel benchmark, and
# GLM-5 decode at batch 1 with BF16 and FP8 weights (three KV paths each). Results in $OUT/b.tar.gz.
set -u
T0=$(date +%s); el() { echo "[+$(( $(date +%s) - T0 ))s]"; }
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
W=/tmp/b; mkdir -p $W; B=.device/bin
for t in kernels_gpu_kv_cast kernels_gpu_mla_decode kernels_gpu_linear_fp8 kernels_gpu_indexer kernels_gpu_topk_paths; do
  timeout 200 $B/$t > $W/$t.log 2>&1; echo "$t rc=$? $(grep -c '^\[       OK' $W/$t.log) ok $(grep -c '^\[  FAILED' $W/$t.log) failed $(el)"
done
timeout 200 $B/glm5prof bench kernels --out $W/kv-kernels.json > $W/bench.txt 2>&1; echo "bench rc=$? $(el)"
for wd in fp8 bf16; do
  timeout 220 $B/glm5prof profile --model glm5 --weights-dtype $wd --kv-path all --batch 1 --context 32768 --pool-tokens 495000 \
    --steps 5 --warmup 2 --out $W/glm5-b1-$wd > $W/glm5-b1-$wd.log 2>&1; echo "profile $wd rc=$? $(el)"; tail -6 $W/glm5-b1-$wd.log
  rm -f $W/glm5-b1-$wd/trace.json
done
grep -h "block-scaled\|fp8 linear\|fp8 moe" $W/kernels_gpu_linear_fp8.log | head -30
sed -n '/^kernel /,$p' $W/bench.txt
tar czf $OUT/b.tar.gz -C /tmp b; echo "done $(el)"
