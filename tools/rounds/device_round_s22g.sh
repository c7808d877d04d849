#!/usr/bin/env bash
# Session 22, call S22g: after the review's refactor of the top-k (warp_append for every candidate copy, one
# histogram-clearing and one gather decision in the kernel, no behaviour change): its GPU tests and the engine's.
# Usage: tools/device_pack.sh build-lead kernels_gpu_topk_paths kernels_gpu_indexer engine_gpu_graph; run `bash THIS`,
#        carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s22g
device_round_test kernels_gpu_topk_paths 100
device_round_test kernels_gpu_indexer 100
device_round_test engine_gpu_graph 100
device_round_pack
