#!/usr/bin/env bash
# Session 22, call S22f: the review's mends to the top-k (the score kernel's histogram used only when it counts exactly
# the request's positions, else the kernel's own pass 0; candidate copies bounded by the buffer; the histogram loaded
# only when used) and the new GPU tests: top_hist at every cluster size and batch, at and past the gathered form's
# capacity, a mismatched histogram. Then engine_gpu_graph and engine_gpu_golden on the final build.
# Usage: tools/device_pack.sh build-lead kernels_gpu_topk_paths kernels_gpu_indexer engine_gpu_graph engine_gpu_golden;
#        .device/shared as in S22a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s22f
device_round_test kernels_gpu_topk_paths 150
device_round_test kernels_gpu_indexer 150
device_round_test engine_gpu_graph 200
device_round_test engine_gpu_golden 150
device_round_pack
