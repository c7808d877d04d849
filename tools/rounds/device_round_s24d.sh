#!/usr/bin/env bash
# Session 24, call S24d: what bounds the FP8 tensor-core GEMM on o_proj (6144 x 16384) at m 128 (81.8 us, stream-K)
# and m 32 (48.3 us): ncu's sections on the first launch of each token tile in `bench kernels --only linear --quick`
# (the twin check of o_proj at that m). S24c's ncu call matched nothing (the demangled name reads "<(int)128>").
# Usage: tools/device_pack.sh build-lead glm5prof; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s24d
for n in 128 32; do
  timeout 150 ncu --kernel-name-base demangled --kernel-name "regex:wgmma_kernel<.int.$n>" --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats \
    $BIN/glm5prof bench kernels --only linear --quick --out $W/ncu-linear-$n.json > $W/ncu$n.txt 2> $W/ncu$n.err
  echo "ncu N $n rc=$?"
  sed -n '/wgmma_kernel<(int)'$n'>/,$p' $W/ncu$n.txt | grep -vE "^ *-+ *$|^ *$" | grep -E "Duration|Throughput|Busy|Bandwidth|Stall|Cycles|Issue|Eligible|Active Warps|Registers|Hit Rate|Elapsed|Pipe" | head -45
done
device_round_pack
