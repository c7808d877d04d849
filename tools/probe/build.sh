#!/usr/bin/env bash
# Builds tools/probe/mla_wgmma_probe (sm_90a) against a configured build directory's libglm5_common.a
# and libglm5_kernels.a (mla_decode_num_splits, error helpers). Usage: tools/probe/build.sh BUILD_DIR
set -euo pipefail
build=${1:-build-lead}
/usr/local/cuda/bin/nvcc -std=c++20 --expt-relaxed-constexpr -O3 -lineinfo -arch=sm_90a -I. -Isrc \
  tools/probe/mla_wgmma_probe.cu "$build/libglm5_kernels.a" "$build/libglm5_common.a" -lcublasLt \
  -o "$build/mla_wgmma_probe"
echo "built $build/mla_wgmma_probe"
