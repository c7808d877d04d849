#!/usr/bin/env bash
# One multi-GPU device call (issue 8): the TP correctness test and TP profiles against the one-GPU
# shard simulation.   tools/device_tp.sh BIN OUT TP
set -u
# Libraries built here that the GPU image lacks (e.g. libsimdjson) travel in .device/lib.
[ -d .device/lib ] && export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}"
bin=${1:?bin}; out=${2:?out}; tp=${3:-2}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
if ! ldconfig -p | grep -q libnccl.so.2 && [ -z "${GLM5_NCCL_LIB:-}" ]; then
  GLM5_NCCL_LIB=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0] + '/lib/libnccl.so.2')" 2>/dev/null)
  export GLM5_NCCL_LIB
fi
echo "NCCL: ${GLM5_NCCL_LIB:-system}"; nvidia-smi -L
timeout 300 "$bin/engine_gpu_tensor_parallel" > "$out/tp_test.log" 2>&1; echo "tp test rc=$?"
grep -E "step 0|step 3|step 7|OK|FAILED|Failure" "$out/tp_test.log" | head -30
common=(--model glm5 --context 32768 --steps 5 --warmup 2)
for b in 1 32; do
  pool=495000; [ "$b" = 32 ] && pool=1100000
  paths=all; [ "$b" = 32 ] && paths=fp8
  timeout 200 "$bin/glm5prof" profile "${common[@]}" --batch $b --pool-tokens $pool --kv-path $paths --tp "$tp" --out "$out/tp$tp-b$b" > "$out/tp$tp-b$b.log" 2>&1
  echo "tp$tp b$b rc=$?"; grep -E "path|error" "$out/tp$tp-b$b.log"
  timeout 200 "$bin/glm5prof" profile "${common[@]}" --batch $b --pool-tokens $pool --kv-path $paths --tp "$tp" --rank 0 --out "$out/sim$tp-b$b" > "$out/sim$tp-b$b.log" 2>&1
  echo "sim tp$tp rank0 b$b rc=$?"; grep -E "path|error" "$out/sim$tp-b$b.log"
done
