#!/usr/bin/env python3
"""Writes a synthetic torch.profiler (Kineto) Chrome trace of about --mb megabytes, for timing trace readers.

Shape per decode step: a ProfilerStep#N user_annotation; per layer an aten::linear cpu_op launching a
GEMM kernel and an aten::copy_ cpu_op launching a cast kernel (direct_copy_kernel_cuda ... LoadWithCast);
each launch is a cudaLaunchKernel cuda_runtime event linked to its kernel by args.correlation and ac2g
flow events, and each kernel names its cpu_op's External id. Timestamps are microseconds (floats).
Usage: gen_kineto_trace.py OUT.json [--mb 500] [--gzip]
"""
import argparse, gzip, io, json

CAST = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
        "::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, "
        "at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
        "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, "
        "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}"
        "::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, "
        "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)")
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--mb", type=float, default=500)
    p.add_argument("--gzip", action="store_true", help="also write OUT.gz")
    a = p.parse_args()
    target = int(a.mb * 1e6)
    pid, tid = 4242, 4243
    head = ('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150015901696, '
            '"computeMajor": 9, "computeMinor": 0, "numSms": 132, "warpSize": 32}],\n'
            '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},\n  "traceEvents": [\n')
    tail = '\n  ],\n  "traceName": "synthetic", "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000\n}\n'
    out = open(a.out, "w")
    out.write(head)
    written, ts, corr, ext, step = len(head), 1000.0, 1, 1, 0
    first = True
    while written < target:
        ev = []
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": pid, "tid": tid,
                   "ts": ts, "dur": 61 * 40.0, "args": {"External id": ext, "Trace name": "PyTorch Profiler", "Trace iteration": 0}})
        ext += 1
        t = ts + 1.0
        for layer in range(61):
            for op, kname, kdur in (("aten::linear", GEMM, 12.5), ("aten::copy_", CAST, 6.25)):
                ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": pid, "tid": tid, "ts": t, "dur": 8.0,
                           "args": {"External id": ext, "Sequence number": ext, "Fwd thread id": 0, "Record function id": 0,
                                    "Concrete Inputs": ["", "", "False"], "Input type": ["c10::BFloat16", "c10::Float8_e4m3fn", "Scalar"],
                                    "Input Strides": [[576, 1], [576, 1], []], "Input Dims": [[131072, 576], [131072, 576], []],
                                    "Ev Idx": ext}})
                ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                           "ts": t + 2.0, "dur": 4.5, "args": {"cbid": 211, "correlation": corr, "External id": ext}})
                ev.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7, "ts": t + 10.0, "dur": kdur,
                           "args": {"External id": ext, "queued": 0, "device": 0, "context": 1, "stream": 7,
                                    "correlation": corr, "registers per thread": 32, "shared memory": 0,
                                    "blocks per SM": 1.5, "warps per SM": 12.0, "grid": [1024, 1, 1], "block": [128, 1, 1],
                                    "est. achieved occupancy %": 100}})
                ev.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": t + 10.0, "cat": "ac2g", "name": "ac2g", "bp": "e"})
                ev.append({"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": t + 2.0, "cat": "ac2g", "name": "ac2g"})
                corr += 1
                ext += 1
                t += 20.0
        ts += 61 * 40.0 + 10.0
        step += 1
        s = ",\n".join("    " + json.dumps(e) for e in ev)
        if not first:
            s = ",\n" + s
        first = False
        out.write(s)
        written += len(s)
    out.write(tail)
    out.close()
    if a.gzip:
        with open(a.out, "rb") as src, gzip.open(a.out + ".gz", "wb", compresslevel=1) as dst:
            while True:
                b = src.read(1 << 24)
                if not b:
                    break
                dst.write(b)


if __name__ == "__main__":
    main()
