#!/usr/bin/env bash
# Build FlashMLA's SM90 sparse FP8 decode from its public source and time it on GLM-5 shapes
# (issue 3). Run ON the device from the repo root, with $OUT set, after
#   tools/flashmla_prepare.sh /work/.mirror/deepseek-ai+FlashMLA/repo /work/.mirror/NVIDIA+cutlass/repo
# wrote .device/flashmla-src.tar.xz here (send it with `run carry [".device"]`).
#
#   OUT=/some/dir bash tools/device_flashmla.sh
#
# Needs: nvcc (CUDA >= 12.3; FlashMLA's sm90 path), python3 with torch (CUDA build), pybind11,
# setuptools, ninja; no network. Writes $OUT/flashmla_build.log, $OUT/flashmla.txt (table),
# $OUT/flashmla.json (records, tools/flashmla_bench.py). Stops itself within FLASHMLA_BUDGET_S
# (default 420) seconds: the build gets what is left minus FLASHMLA_BENCH_S (default 100).
#
# What is built (in /tmp, nothing is written to the repository): FlashMLA's own kernel sources for
# the SM90 sparse FP8 decode path only -- the scheduler-metadata kernel, the split-K combine kernel
# and the four sm90 sparse_fp8 instantiations (V3.2 576-d and MODEL1 512-d layouts x 64/128 heads;
# the dispatcher needs all four) -- with FlashMLA's own nvcc flags, for sm_90a only. Two small files
# of ours replace its api.cpp: a pybind module that exposes only sparse_decode_fwd (the entry point
# flash_mla_with_kvcache calls for sparse FP8 decode), and stubs for the three SM100 kernel entry
# points the dispatcher references (they throw; an H200 never takes that branch). This keeps the
# build to 8 translation units (the full setup.py builds 24, incl. the SM100 CUTLASS prefill).
# Env: FLASHMLA_BENCH_ARGS: extra arguments for tools/flashmla_bench.py; NVCC_EXTRA: extra nvcc flags.
set -uo pipefail

T0=$(date +%s)
BUDGET=${FLASHMLA_BUDGET_S:-420}
BENCH_S=${FLASHMLA_BENCH_S:-100}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
: "${OUT:?set OUT to the folder for logs}"
mkdir -p "$OUT"
REPO=$(pwd)
TAR=$REPO/.device/flashmla-src.tar.xz
LOG=$OUT/flashmla_build.log
TXT=$OUT/flashmla.txt
say() { echo "device_flashmla: $*" | tee -a "$TXT"; }
: > "$TXT"

if [[ ! -f "$TAR" ]]; then
  say "FAILED: $TAR is missing (run tools/flashmla_prepare.sh here and carry .device)"; exit 1
fi
SRC=$(mktemp -d /tmp/glm5-flashmla.XXXXXX)
tar -xJf "$TAR" -C "$SRC" || { say "FAILED: cannot extract $TAR"; exit 1; }
FM=$SRC/flashmla
say "source: $(head -1 "$FM/PROVENANCE.txt"); $(sed -n 2p "$FM/PROVENANCE.txt")"

# ninja: BuildExtension compiles in parallel only through it (else one file at a time).
if ! command -v ninja >/dev/null 2>&1; then
  NB=$(python3 -c 'import ninja, os; print(ninja.BIN_DIR)' 2>/dev/null) && export PATH="$NB:$PATH"
fi
command -v ninja >/dev/null 2>&1 || say "WARNING: no ninja: the build will be serial and may not fit the budget"
say "nvcc: $(nvcc --version 2>&1 | grep -o 'release [0-9.]*'); $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)"

# --- our pybind module: only the sparse decode entry point -------------------------------------
cat > "$FM/csrc/api/glm5_sparse_decode_api.cpp" <<'EOF'
// glm5prof (tools/device_flashmla.sh): a pybind module exposing only FlashMLA's sparse decode
// entry point, so the build needs no dense / prefill kernels. Not part of FlashMLA.
#include <pybind11/pybind11.h>

#include "sparse_decode.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "FlashMLA sparse FP8 decode only (built by glm5prof tools/device_flashmla.sh)";
  m.def("sparse_decode_fwd", &sparse_attn_decode_interface);
}
EOF
# --- stubs for the SM100 entry points the dispatcher names (never reached on SM90) -----------
cat > "$FM/csrc/api/glm5_sm100_stubs.cu" <<'EOF'
// glm5prof (tools/device_flashmla.sh): the SM100 sparse decode kernels are not built; these
// explicit specializations satisfy the linker and throw if an SM100 GPU ever dispatches to them.
#include <stdexcept>

#include "params.h"
#include "sm100/decode/head64/kernel.h"
#include "sm100/prefill/sparse/fwd_for_small_topk/head128/phase1.h"

namespace sm100::decode::head64 {
template <>
void run_flash_splitkv_mla_fp8_sparse_kernel<ModelType::V32>(const SparseAttnDecodeParams&) {
  throw std::runtime_error("glm5prof FlashMLA build: SM100 kernels were not compiled");
}
template <>
void run_flash_splitkv_mla_fp8_sparse_kernel<ModelType::MODEL1>(const SparseAttnDecodeParams&) {
  throw std::runtime_error("glm5prof FlashMLA build: SM100 kernels were not compiled");
}
}  // namespace sm100::decode::head64

namespace sm100::fwd_for_small_topk::head128 {
template <>
void run_fwd_for_small_topk_phase1_kernel<SparseAttnFwdMode::DecodeWithSplitKV, 512>(
    const SparseFwdArgT<SparseAttnFwdMode::DecodeWithSplitKV>&) {
  throw std::runtime_error("glm5prof FlashMLA build: SM100 kernels were not compiled");
}
}  // namespace sm100::fwd_for_small_topk::head128
EOF
# --- our setup script: FlashMLA's flags, sm_90a only, the sparse decode sources only -----------
cat > "$FM/glm5_setup.py" <<'EOF'
# glm5prof (tools/device_flashmla.sh): builds flash_mla.cuda with only the SM90 sparse FP8 decode path.
import os
from pathlib import Path
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

here = Path(__file__).resolve().parent
nvcc = ["-O3", "-std=c++20", "-DNDEBUG", "-D_USE_MATH_DEFINES", "-Wno-deprecated-declarations",
        "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
        "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--expt-relaxed-constexpr", "--expt-extended-lambda",
        "--use_fast_math", "--ptxas-options=-v,--register-usage-level=10,--warn-on-spills,--warn-on-local-memory-usage,--warn-on-double-precision-use",
        "-lineinfo", "-gencode", "arch=compute_90a,code=sm_90a"] + os.environ.get("NVCC_EXTRA", "").split()
setup(
    name="flash_mla_glm5_sparse_decode",
    version="0.0.0",
    ext_modules=[CUDAExtension(
        name="flash_mla.cuda",
        sources=[
            "csrc/api/glm5_sparse_decode_api.cpp",
            "csrc/api/glm5_sm100_stubs.cu",
            "csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu",
            "csrc/smxx/decode/combine/combine.cu",
            "csrc/sm90/decode/sparse_fp8/instantiations/v32_persistent_h64.cu",
            "csrc/sm90/decode/sparse_fp8/instantiations/v32_persistent_h128.cu",
            "csrc/sm90/decode/sparse_fp8/instantiations/model1_persistent_h64.cu",
            "csrc/sm90/decode/sparse_fp8/instantiations/model1_persistent_h128.cu",
        ],
        extra_compile_args={"cxx": ["-O3", "-std=c++20", "-DNDEBUG", "-Wno-deprecated-declarations"],
                            "nvcc": nvcc},
        include_dirs=[here / "csrc", here / "csrc" / "kerutils" / "include", here / "csrc" / "sm90",
                      here / "csrc" / "cutlass" / "include", here / "csrc" / "cutlass" / "tools" / "util" / "include"],
    )],
    cmdclass={"build_ext": BuildExtension},
)
EOF

BUILD_S=$(( $(left) - BENCH_S ))
say "building (MAX_JOBS=16, limit ${BUILD_S} s) -> $LOG"
B0=$(date +%s)
( cd "$FM" && MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a timeout -k 5 "$BUILD_S" \
    python3 glm5_setup.py build_ext --inplace ) > "$LOG" 2>&1
RC=$?
say "build rc=$RC in $(( $(date +%s) - B0 )) s"
SO=$(ls "$FM"/flash_mla/cuda*.so 2>/dev/null | head -1)
if [[ $RC -ne 0 || -z "$SO" ]]; then
  [[ $RC -eq 124 || $RC -eq 137 ]] && say "FLASHMLA BUILD FAILED: timed out after ${BUILD_S} s" ||
    say "FLASHMLA BUILD FAILED (rc=$RC); last 40 lines of $LOG:"
  tail -40 "$LOG" | tee -a "$TXT"
  exit 1
fi
# Resource report of the sparse decode kernels (ptxas -v), for the write-up.
grep -E "Compiling entry function|Used [0-9]+ registers|spill stores|bytes stack frame" "$LOG" \
  > "$OUT/flashmla_ptxas.txt" 2>/dev/null || true

BENCH_LEFT=$(( $(left) - 3 ))
say "running tools/flashmla_bench.py (limit ${BENCH_LEFT} s)"
PYTHONPATH="$FM${PYTHONPATH:+:$PYTHONPATH}" timeout -k 5 "$BENCH_LEFT" \
  python3 "$REPO/tools/flashmla_bench.py" "$OUT/flashmla.json" --provenance "$FM/PROVENANCE.txt" \
  ${FLASHMLA_BENCH_ARGS:-} 2>&1 | tee -a "$TXT"
RC=${PIPESTATUS[0]}
[[ $RC -eq 124 || $RC -eq 137 ]] && say "FLASHMLA BENCH TIMED OUT after ${BENCH_LEFT} s"
say "bench rc=$RC; total $(( $(date +%s) - T0 )) s"
exit "$RC"
