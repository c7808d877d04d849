#!/usr/bin/env bash
# One device call of the wgmma MLA kernel's tuning rounds (2026-11-30, session 6; calls S6d, S6e, S6g, S6h, each
# on the kernel source of its commit): correctness (gpu_mla_decode), phase timing (tools/probe/mla_wgmma_probe),
# `bench kernels --only mla --quick`. Results: reports/2026-11-30-h200-mla-wgmma-probe.md and -kv-kernels.md.
#   tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode mla_wgmma_probe; run `bash THIS TAG` with carry [".device"]
set -u
TAG=${1:-s6}
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared"
BIN=$PWD/.device/bin; W=$OUT/$TAG; mkdir -p $W
timeout 60 $BIN/mla_wgmma_probe > $W/probe.txt 2>&1; echo "probe rc=$?"; cat $W/probe.txt
timeout 240 $BIN/kernels_gpu_mla_decode > $W/mla_test.log 2>&1; echo "mla test rc=$?"
grep -E "Failure|FAILED|what|Expected|Which is|differ|PASSED" $W/mla_test.log | head -30
grep -c "wgmma kernel:" $W/mla_test.log
timeout 90 $BIN/glm5prof bench kernels --only mla --quick --reps 20 --out $W/mla.json > $W/mla.txt 2>&1; echo "mla bench rc=$?"
grep -E "mla_decode|copy|gemm|error" $W/mla.txt | grep -v "B=1 " | head -40
(cd $OUT && tar czf $TAG.tar.gz $TAG && rm -rf $TAG)
