// FP8 block-scaled weights on the GPU (kernels/linear_fp8.cu), used by linear_cuda (kernels/linear.h)
// when LinearParams.w_dtype is F8_E4M3. Weight element (r, c) = e4m3(w[r*ldw + c]) *
// w_scale[(r/128)*ld_scale + c/128] (DeepSeek-V3 / GLM-5-FP8 `weight_scale_inv`, 128x128 blocks).
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/linear.h"

namespace glm5 {

// y[m, n] (=|+=) x[m, k] W^T with fp32 x and fp32 accumulation; W dequantized in registers. Memory-bound
// GEMV for small m: each warp owns 4 output rows and a chunk of up to 16 tokens; blocks of the same
// rows and different token chunks are adjacent in the grid, so W comes from HBM once (L2 serves the
// other chunks). Bytes: n*k (W) + n*k/16384*4 (scales) + m*k*4 (x, from L2 per row block) + m*n*4 (y).
// Vector path (k % 16 == 0, w, ldw, x 16-byte aligned): 16-byte weight loads; else a scalar path.
// Throws glm5::Error on bad params (validate_linear_params) or a launch failure.
// Split-K: when n * ceil(m/MT) / 16 blocks cannot fill the GPU (kv_a 576 rows, o_proj at m = 1), the k
// columns are cut into S = linear_fp8_gemv_splits(p) ranges of 512-column multiples; each writes partial
// sums into `partial` (>= S*m*n floats; null or too small: no split) and a reduce kernel adds them in
// split order (deterministic).
int linear_fp8_gemv_splits(const LinearParams& p);
void linear_fp8_gemv_cuda(const LinearParams& p, float* partial, size_t partial_elems, cudaStream_t stream);

// out[r, c] = bf16(e4m3(w[r*ldw + c]) * w_scale[(r/128)*ld_scale + c/128]) for r < n, c < k; out is
// [n, k] dense BF16 (the staging copy linear_cuda multiplies with cuBLASLt when m is large).
void fp8_block_dequant_bf16_cuda(const LinearParams& p, uint16_t* out, cudaStream_t stream);

// Per-token, per-128-column FP8 quantization of fp32 activations x [m, k] (k % 128 == 0):
// scale[t, b] = amax(x[t, 128b : 128b + 128]) / 448 (1 when 0), codes[t, c] = e4m3(x[t, c] / scale);
// scales stored [k/128][m] (tokens fastest) or [m][k/128].
void fp8_quantize_activations_cuda(const float* x, int m, int k, uint8_t* codes, float* scales, bool tokens_fastest,
                                   cudaStream_t stream);

}  // namespace glm5
