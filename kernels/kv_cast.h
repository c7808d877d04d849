// The two cast paths of DESIGN.md: FP8 latent rows -> BF16 rows [L + R] (latent dequantized with
// its per-group scale, then rope copied), either for the whole pool or for gathered top-k rows.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/kv_layout.h"

namespace glm5 {

// `cast` path: every row of the pool. bytes = rows * (row_bytes + 2*(L+R)).
struct KvCastParams {
  const uint8_t* pool;   // [rows, layout.row_bytes] FP8 rows
  LatentLayout layout;   // must be fp8
  uint16_t* out;         // [rows, L + R] bf16
  int64_t rows = 0;
};
void kv_cast_cpu(const KvCastParams& p);
void kv_cast_cuda(const KvCastParams& p, cudaStream_t stream);

// `gather-cast` path: row i of `out` is pool row indices[i] (index -1: a zero row).
// Also writes compact_indices[i] = indices[i] < 0 ? -1 : i, so attention can read `out` directly.
struct KvGatherCastParams {
  const uint8_t* pool;
  LatentLayout layout;        // must be fp8
  const int32_t* indices;     // [count] pool slots (e.g. [B, topk] flattened)
  uint16_t* out;              // [count, L + R] bf16
  int32_t* compact_indices;   // [count]
  int64_t count = 0;
};
void kv_gather_cast_cpu(const KvGatherCastParams& p);
void kv_gather_cast_cuda(const KvGatherCastParams& p, cudaStream_t stream);

}  // namespace glm5
