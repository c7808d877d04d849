#!/usr/bin/env bash
# Packs built executables for a device call (see ../.library/device): strips them and writes
# .device/pack.tar.xz with bin/<name> (the device scripts unpack it with `tar xJf .device/pack.tar.xz -C .device`).
# Usage: tools/device_pack.sh BUILD_DIR EXECUTABLE...
set -euo pipefail
build=$1; shift
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" .device
for t in "$@"; do
  [ -x "$build/$t" ] || { echo "device_pack: $build/$t: not built" >&2; exit 1; }
  cp "$build/$t" "$tmp/bin/" && strip "$tmp/bin/$t" 2>/dev/null || true
done
# Shared libraries from Debian packages that the device image lacks (libsimdjson) travel as lib/ (-> .device/lib,
# which the device scripts put on LD_LIBRARY_PATH); found with ldd, so a fresh checkout packs them too.
mkdir -p "$tmp/lib"
for t in "$@"; do
  ldd "$build/$t" | awk '/libsimdjson/ {print $3}' | while read -r l; do cp -L "$l" "$tmp/lib/"; done
done
# XZ_OPT (default -T2): `XZ_OPT="-9 -T1"` packs every *_gpu_* executable in ~8 MB instead of ~45 (one stream with a
# 64 MiB dictionary finds the libraries the executables share; ~2 min on 2 cores), under the device tool's 64 MiB.
XZ_OPT="${XZ_OPT:--T2}" tar cJf .device/pack.tar.xz -C "$tmp" bin lib
ls -la .device/pack.tar.xz
