#!/usr/bin/env bash
# Session 15, call S15c: S15b's double-buffered activation loads taken back (slower at batch 128); the warp split
# over a batch tile (1 / 2 / 4 warps per 16 rows, the _tc_ng records) measured side by side; the dispatch's new
# thresholds (absorb tc from batch 2, unabsorb at H <= 16 only above batch 16). Same steps as S15b.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_absorb; run `bash THIS`, carry [".device"]
S15_TAG=s15c exec bash tools/rounds/device_round_s15b.sh  # the same steps; the code measured is the checkout's
