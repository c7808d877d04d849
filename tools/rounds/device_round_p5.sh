#!/usr/bin/env bash
# Device call P5 (2026-11-29, session 4): what bounds the FP8 weight-streaming kernels at ~75% of the copy
# rate. Nsight Compute (if the lent machine has it) on one launch each of the FP8 GEMV (o_proj 6144 x 16384,
# m = 1, from `bench kernels --only linear`) and of the per-token MoE gate_up kernel (GLM-5 batch 1 step).
set -u
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/p5; mkdir -p $W
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}"; ls /usr/local/cuda/bin | tr '\n' ' ' | head -c 600; echo
[[ -z "$NCU" ]] && exit 0
$NCU --version | tail -1
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats"
timeout 200 $NCU $S --kernel-name regex:linear_fp8_gemv_vec_kernel --launch-skip 0 --launch-count 1 \
  $BIN/glm5prof bench kernels --only linear --quick --reps 1 --out /tmp/l.json > $W/ncu-gemv.txt 2>&1; echo "ncu gemv rc=$?"
timeout 250 $NCU $S --kernel-name regex:moe_gate_up_fp8_kernel --launch-skip 10 --launch-count 1 \
  $BIN/glm5prof profile --model glm5 --kv-path fp8 --batch 1 --context 4096 --weights-dtype fp8 --steps 1 --warmup 1 \
  --untraced-steps 0 --out /tmp/np > $W/ncu-moe.txt 2>&1; echo "ncu moe rc=$?"
for f in gemv moe; do echo "== $f"; grep -E "Throughput|Bandwidth|Busy|Issue Slots|Stall|Warp Cycles|Achieved Occupancy|Registers|Executed Ipc|Pipe|L1/TEX Hit|L2 Hit|Mem Pipes|Duration|Theoretical Occupancy|One or More|No Eligible|Active Warps" $W/ncu-$f.txt | head -45; done
(cd $OUT && tar czf p5.tar.gz p5 && rm -rf p5)
