// BF16-weight GEMV for the small projections of a decode step at small m (used by linear_cuda).
// At GLM-5 batch 1 the router (256 x 6144) and the indexer's weights_proj (32 x 6144) went through
// cuBLASLt with x first converted to BF16: two launches, ~7 us per call on the H200 (2026-11-29)
// for 3.1 MB / 0.4 MB of weights. Here: one launch, fp32 x (no rounding of the activations: closer
// to the CPU reference than the BF16-x GEMM), each weight byte read once.
#pragma once
#include <cuda_runtime.h>

#include "kernels/linear.h"

namespace glm5 {

// Whether linear_bf16_gemv_cuda handles p and is the better choice: BF16 weight, 1 <= m <= 4,
// n * k <= 16M elements (larger weights: cuBLASLt streams them at ~full bandwidth), k and the row
// stride multiples of 8, w and x 16-byte aligned. split_bf16 (x carried as two BF16 halves for
// precision) is satisfied too: the GEMV keeps x in fp32.
bool linear_bf16_gemv_preferred(const LinearParams& p);
// y[t, r] (=|+=) sum_c x[t, c] * bf16(w[r * ldw + c]), fp32 products and sums. Grid: 4 rows per CTA,
// the 8 warps of a CTA split k (lane l of warp w reads 8 weights = 16 bytes at columns
// 8 (32 w + l) + 2048 i), warp sums then the 8 warp partials added in warp order (deterministic).
// Throws glm5::Error when !linear_bf16_gemv_preferred(p) or on a launch failure.
void linear_bf16_gemv_cuda(const LinearParams& p, cudaStream_t stream);

}  // namespace glm5
