#!/usr/bin/env bash
# Newcomer command 2 (and what CI runs): set up, build, and pass the tests. GPU tests (ctest label
# `gpu`) are left out on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh
labels=(-LE gpu)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then labels=(); fi
ctest --test-dir build --output-on-failure -j"$(nproc)" "${labels[@]}"
