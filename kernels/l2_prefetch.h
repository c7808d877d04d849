// L2 prefetch of a weight matrix ahead of the kernel that streams it.
//
// Why: at batch 1 a GLM-5 layer has ~45 us of latency-bound kernels between attn.q_up_proj and
// attn.o_proj (the indexer's score and top-k, attn.mla, attn.v_unabsorb) during which HBM is nearly
// idle, and then attn.o_proj streams 100 MB of FP8 weights (6144 x 16384) in ~32 us. Issued on the side
// stream at the start of that window, this kernel asks L2 (50 MB on the H200) to fetch a fraction of
// those bytes, meant for o_proj to find there. Measured on the H200 (session 14), it does not: the kernels in
// between evict the lines first (EngineOptions::o_proj_l2_prefetch has the numbers; off by default).
//
// Which bytes: every row is cut into periods of `period` bytes and the first `take` bytes of each period
// are fetched. A spread-out pattern, not one contiguous block: the GEMV that streams the matrix gives
// each warp a few rows and a column range (split-K), and walks the columns in order; a block prefix
// would give some CTAs only L2 hits and leave the others HBM-bound, where a periodic pattern gives
// every warp the same hit fraction (kernels/linear_fp8.cu's layout; any period <= its split width).
//
// What it is not: no memory is written. The prefetch is a hint (cp.async.bulk.prefetch.L2, PTX ISA
// "cp.async.bulk.prefetch"): the kernel returns once its requests are issued, the lines arrive
// asynchronously, and nothing guarantees they are still in L2 when the consumer runs. The engine measures
// what it buys (reports/*-h200-decode-step.md); the CPU twin only validates (a host has no L2 to fill).
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "common/dtype.h"  // GLM5_HD

namespace glm5 {

struct L2PrefetchParams {
  const void* base = nullptr;  // first byte of row 0 (16-byte aligned)
  int64_t rows = 0;            // matrix rows (> 0)
  int64_t row_bytes = 0;       // bytes of a row the consumer reads (> 0)
  int64_t row_stride = 0;      // bytes between rows (>= row_bytes, multiple of 16; may equal row_bytes)
  int64_t period = 0;          // bytes (multiple of 16, > 0)
  int64_t take = 0;            // bytes fetched at the start of each period (multiple of 16, 0 < take <= period)
  // Insert the lines with the L2::evict_last priority (createpolicy.fractional; PTX ISA "createpolicy"): the
  // kernels between the prefetch and its consumer stream their own data through L2 and would evict
  // normal-priority lines first-in first-out. Whether the priority holds without a persisting set-aside
  // (cudaLimitPersistingL2CacheSize) is measured (reports/*-h200-decode-step.md).
  bool evict_last = false;
};

// Throws glm5::Error naming the field unless the constraints above hold and the request count
// rows * ceil(row_bytes / period) is at most 2^31.
void validate_l2_prefetch_params(const L2PrefetchParams& p);

// The plan that fetches about `fraction` (0 < fraction <= 1) of a [rows, row_bytes] matrix with rows
// `row_stride` bytes apart: period 4096 bytes (at most 1/2 of the split width of kernels/linear_fp8.cu's
// GEMV at GLM-5 shapes), or the row rounded up to 16 bytes when shorter (GLM-5's q_b: 2048-byte rows), take =
// fraction * period rounded down to 16 bytes (at least 16).
// `period` > 0 (a multiple of 16) replaces the 4096-byte default (tuning; still capped at the row).
L2PrefetchParams l2_prefetch_plan(const void* base, int64_t rows, int64_t row_bytes, int64_t row_stride,
                                  double fraction, int64_t period = 0);
// Bytes the plan asks L2 for (the last period of a row may be shorter than `take`).
int64_t l2_prefetch_bytes(const L2PrefetchParams& p);

// The plan's requests: one per (row, period), request i = row * per_row + period index. Its start (bytes from
// p.base) and size: the period's first `take` bytes, clipped at the row's end and rounded down to 16 (0: nothing to
// ask). The kernel issues exactly these; the CPU tests enumerate them.
struct L2PrefetchRequest {
  int64_t offset = 0;
  unsigned bytes = 0;
};
GLM5_HD int64_t l2_prefetch_requests(const L2PrefetchParams& p) {
  return p.rows * ((p.row_bytes + p.period - 1) / p.period);
}
GLM5_HD L2PrefetchRequest l2_prefetch_request(const L2PrefetchParams& p, int64_t i) {
  const int64_t per_row = (p.row_bytes + p.period - 1) / p.period;
  const int64_t row = i / per_row, off = (i % per_row) * p.period;
  const int64_t n = p.row_bytes - off < p.take ? p.row_bytes - off : p.take;
  return {row * p.row_stride + off, unsigned(n) & ~15u};
}

void l2_prefetch_cpu(const L2PrefetchParams& p);                       // validates only
void l2_prefetch_cuda(const L2PrefetchParams& p, cudaStream_t stream);  // one thread per (row, period)

}  // namespace glm5
