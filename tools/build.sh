#!/usr/bin/env bash
# Installs the dependencies (tools/setup.sh) and builds glm5prof and its tests into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > build.cmake.log 2>&1 || { cat build.cmake.log; exit 1; }
cmake --build build -j"$(nproc)"
