#!/usr/bin/env bash
# Builds tools/probe/mla_wgmma_probe (sm_90a) against a configured build directory's libglm5_common.a
# and libglm5_kernels.a (mla_decode_num_splits, error helpers).
# Usage: tools/probe/build.sh BUILD_DIR [NAME [NVCC_DEFINES...]]  e.g. build-lead probe_f4 -DGLM5_MLA_WG_INFLIGHT=4
set -euo pipefail
build=${1:-build-lead}
name=${2:-mla_wgmma_probe}
shift $(( $# > 2 ? 2 : $# ))
/usr/local/cuda/bin/nvcc -std=c++20 --expt-relaxed-constexpr -O3 -lineinfo -arch=sm_90a -I. -Isrc "$@" \
  tools/probe/mla_wgmma_probe.cu "$build/libglm5_kernels.a" "$build/libglm5_common.a" -lcublasLt \
  -o "$build/$name" 2>&1 | grep -v C7519 || true
echo "built $build/$name $*"
