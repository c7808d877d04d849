#!/usr/bin/env bash
# Session 28, call S28h: the final build after a read-only review's mends: WgmmaF16 checked against the twin's fp16
# mode at 2^-11 max|V| (was the bf16 kernel's 2^-7), Auto's lse compared too, the wgmma unit test with fp16 operands,
# the bench's check of the fp16 form against the fp16 twin; the kernel as in S28b. Then the MLA bench on this build.
# Usage: tools/device_pack.sh build-lead glm5prof kernels_gpu_mla_decode kernels_gpu_wgmma
set -u
. tools/device_round_lib.sh
device_round_begin s28h
device_round_test kernels_gpu_wgmma 60
grep -E "^wgmma m64n64" $W/kernels_gpu_wgmma.log | sort -k6 -g | tail -2
device_round_test kernels_gpu_mla_decode 200 --gtest_filter='Shapes/*:GpuMlaDecodeKernelChoice*'
grep -E "wgmma fp16 operands vs fp16 twin" $W/kernels_gpu_mla_decode.log | awk '{print $10/$12}' | sort -g | tail -1 | sed 's/^/worst err \/ tol16: /'
device_round_bench_mla 150
device_round_pack
