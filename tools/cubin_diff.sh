#!/usr/bin/env bash
# Is a change to device code a pure refactor? Builds cubins of the named kernel sources (default: every
# kernels/*.cu and kernels/sm90a/*.cu) at git revision REV (a temporary worktree) and in the working tree, with
# the flags CMake uses (Release, GLM5_PDL=1, sm_90 / sm_90a, -lineinfo), and compares their machine code kernel
# by kernel (tools/cubin_diff.py). Needs nvcc only: no GPU, no cuobjdump.
# Usage: tools/cubin_diff.sh REV [kernels/X.cu ...]      exit status as tools/cubin_diff.py
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: tools/cubin_diff.sh REV [kernels/X.cu ...]}; shift
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(kernels/*.cu kernels/sm90a/*.cu)
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/rev" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add -q --detach "$tmp/rev" "$rev"
build() {  # SRC_ROOT OUT_DIR
  mkdir -p "$2"
  for f in "${files[@]}"; do
    arch=sm_90; case $f in kernels/sm90a/*) arch=sm_90a ;; esac
    nvcc -cubin -O3 -DNDEBUG -DGLM5_PDL=1 -arch=$arch --expt-relaxed-constexpr -lineinfo -std=c++20 \
      -I"$1/src" -I"$1" "$1/$f" -o "$2/$(basename "$f" .cu).cubin" 2>"$2/$(basename "$f" .cu).log" &
    [ "$(jobs -r | wc -l)" -ge "$(nproc)" ] && wait -n
  done
  wait
}
build "$tmp/rev" "$tmp/a"
build "$PWD" "$tmp/b"
python3 tools/cubin_diff.py "$tmp/a" "$tmp/b"
