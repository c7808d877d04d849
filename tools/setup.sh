#!/usr/bin/env bash
# Installs the Debian packages glm5prof builds with. The CUDA Toolkit (nvcc, cudart, cuBLASLt, CUPTI,
# NVTX3) is expected under /usr/local/cuda; everything else comes from Debian.
set -euo pipefail
pkgs=(cmake g++ make libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libsimdjson-dev zlib1g-dev python3 time)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: nvcc not found: install the CUDA Toolkit 12.4+ under /usr/local/cuda" >&2; exit 1
fi
echo "setup: dependencies present"
