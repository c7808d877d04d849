#!/usr/bin/env bash
# Session 19, call S19e: kernel timelines of one batch-1 step (GLM-5, FP8 weights, fp8 path, graphs, 32K context),
# --gemv-fold on and off, traces kept (gzip) to see where the main chain waits after the fold (S19d: the fold saved
# 0.18 ms per step of ~0.9 ms of launches; attn.indexer.score's op time grew by 394 us per step).
# Usage: tools/device_pack.sh build-lead glm5prof; .device/shared as in S19a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s19e
for f in on off; do device_round_trace b1-fold-$f --gemv-fold $f; done
(cd "$OUT" && tar czf "$TAG.tar.gz" "$TAG" && rm -rf "$TAG")
