#!/usr/bin/env bash
# Session 34, call S34g: tools/probe/gather_probe.cu after the review's mends (indices staged in shared memory, no
# dependent index load per tile; the L2 flush followed by a read sweep, so no dirty lines are written back during the
# timed kernel; one CTA per SM for every form): does S34d/S34e's table (bulk 2.70 / 2.05 us per tile at one / two
# tiles in flight, LDGSTS 2.25 / 1.90, ldg 1.99 / 1.93) hold?
# Usage: nvcc -std=c++20 -O3 -arch=sm_90a -I. -Isrc tools/probe/gather_probe.cu build-lead/libglm5_common.a
#        -o build-lead/gather_probe; tools/device_pack.sh build-lead gather_probe; run `bash THIS` with carry
#        [".device"], timeout 120
set -u
. tools/device_round_lib.sh
device_round_begin s34g
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
timeout 90 $BIN/gather_probe > $W/gather.txt 2>&1; echo "gather rc=$?"; cat $W/gather.txt
device_round_pack
