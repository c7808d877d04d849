#!/usr/bin/env bash
# Session 23, call S23c. Where batch 32 and batch 128 spend their steps on the final defaults (the op tables of one
# profile each), to choose the next change at the batches a server runs.
# Usage: tools/device_pack.sh build-lead glm5prof; .device/shared as in S23a; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s23c
device_round_profile b128 128 8192 "[a-z_.]+"
device_round_profile b32 32 32768 "[a-z_.]+"
device_round_pack
