#!/usr/bin/env bash
# Newcomer command 1: set up, build, and run the main job on the embedded default
# (GLM-5 with synthetic weights on a GPU; the tiny GLM-5 on a machine without one).
# Extra arguments go to `glm5prof profile` (e.g. --out DIR, --kv-path fp8).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh
./build/glm5prof profile "$@"
