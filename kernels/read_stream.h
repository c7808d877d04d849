// Read-only memory stream: the read ceiling of HBM, beside the copy ceiling.
//
// Why: the decode step's floor divides bytes by the measured device-to-device copy rate (issue 4), but a
// weight stream only reads. Whether the batch-1 weight kernels (moe.experts at ~75% of copy, attn.o_proj at
// ~75%) sit below what a read-only stream can reach, or at it, decides where the next milliseconds are: this
// kernel is that stream with nothing else in it, timed by `bench kernels` as the `read_stream` ceiling
// (src/engine/kernel_bench.cpp) in a few launch shapes, the best of which is reported.
//
// What it computes (so it can be checked, and so the loads cannot be removed): the XOR of every 32-bit word of
// [src, src + bytes), bytes a multiple of 16. Each thread XORs `unroll` independent 16-byte loads per step
// (ld.global.nc, no L1 allocation), the grid strides over the buffer, each warp XOR-reduces with shuffles and
// one lane atomically XORs into *sink (one 32-bit word; XOR is order-free, so the result is deterministic).
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace glm5 {

struct ReadStreamParams {
  const void* src = nullptr;  // 16-byte aligned
  size_t bytes = 0;           // multiple of 16, > 0
  uint32_t* sink = nullptr;   // one word; the kernel XORs into it (set it to 0 first for the plain XOR)
  int ctas_per_sm = 2;        // 1 .. 8 CTAs of `threads` per SM (grid = ctas_per_sm * SMs)
  int threads = 256;          // 128, 256, 512 or 1024
  int unroll = 8;             // 16-byte loads in flight per thread per step: 1, 2, 4, 8 or 16
};

// Throws glm5::Error naming the field on a null src / sink, a misaligned src, bytes 0 or not a multiple of 16,
// or ctas_per_sm / threads / unroll outside the sets above.
void validate_read_stream_params(const ReadStreamParams& p);
// XOR of the 32-bit words of [src, src + bytes) (host memory).
uint32_t read_stream_xor_cpu(const ReadStreamParams& p);
// *sink ^= XOR of the 32-bit words (device memory). Asynchronous on `stream`.
void read_stream_cuda(const ReadStreamParams& p, cudaStream_t stream);

// The same XOR read in the access pattern of the batch-1 FP8 GEMV-like kernels (kernels/fp8_dot.cuh warp_dots_fp8,
// the MoE per-token kernels): the buffer is [bytes / row_bytes] rows; warp w of the grid takes rows_per_warp
// consecutive rows and walks them together, each step issuing unroll x 16 B per row per lane (32 lanes x 16 B = 512
// contiguous bytes of a row per load), all before any is used. threads per CTA as above; smem_pad bytes of dynamic
// shared memory per CTA (unused) hold the SMs to the kernels' residency (GLM-5 MoE: 2 CTAs of 256 threads per SM
// with ~100 KB). A probe of where the MoE kernels' time goes: this pattern with no math, at their occupancy.
// bytes must be a multiple of row_bytes; row_bytes a positive multiple of 512; rows_per_warp 1, 2, 4 or 8;
// unroll 1, 2, 4 or 8; grid = ceil(rows / (rows_per_warp * threads / 32)) CTAs.
struct ReadRowsParams {
  ReadStreamParams s;   // src, bytes, sink, threads, unroll (ctas_per_sm unused)
  int row_bytes = 6144;
  int rows_per_warp = 4;
  int smem_pad = 0;     // 0 .. 227 KiB
};
void validate_read_rows_params(const ReadRowsParams& p);
void read_rows_cuda(const ReadRowsParams& p, cudaStream_t stream);

}  // namespace glm5
