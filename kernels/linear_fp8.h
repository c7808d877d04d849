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
// split order (deterministic). With `counters` (>= linear_fp8_gemv_counters(p) ints, zero before the
// first call; each call leaves them zero) the last CTA of each output tile does that sum instead of
// a separate reduce kernel: the same bits, one launch fewer. Callers must not run two such GEMVs on
// the same counters at the same time (one stream).
int linear_fp8_gemv_splits(const LinearParams& p);
size_t linear_fp8_gemv_counters(const LinearParams& p);
// l2_lookahead: LinearGroupParams::l2_lookahead (0: off; must be 0..8).
void linear_fp8_gemv_cuda(const LinearParams& p, float* partial, size_t partial_elems, cudaStream_t stream,
                          int* counters = nullptr, size_t counter_elems = 0, int l2_lookahead = 0);

// Several projections of the same x in one GEMV launch (linear.h LinearGroupParams): row blocks of
// p[0], p[1], ... one after another in the grid; each output row is computed exactly as
// linear_fp8_gemv_cuda computes it for the same split count. Supported when every projection is
// F8_E4M3 with scales, takes the vector path, and they share x, m and k. `partial` needs
// linear_fp8_gemv_group_partial(g) floats to split (else no split), `counters`
// linear_fp8_gemv_group_counters(g) ints (same contract as linear_fp8_gemv_cuda's). Throws
// glm5::Error when not supported or on bad params.
bool linear_fp8_gemv_group_supported(const LinearGroupParams& g);
// With g.norm (LinearGroupParams::norm): the group is supported, the norm weight is 16-byte aligned, and the CTA's
// staged x * norm weight (its tokens x its split's columns, fp32) fits 48 KiB of shared memory (GLM-5: k 6144 at
// m <= 2, k 2048 at m <= 4). The kernel then sums x^2 per CTA (shared memory, fixed order) and applies inv_rms to
// its sums (no split) or leaves the split's sum of squares for the tile's last CTA (a split needs `counters`).
bool linear_fp8_gemv_norm_supported(const LinearGroupParams& g);
size_t linear_fp8_gemv_group_partial(const LinearGroupParams& g);
size_t linear_fp8_gemv_group_counters(const LinearGroupParams& g);
void linear_fp8_gemv_group_cuda(const LinearGroupParams& g, float* partial, size_t partial_elems, cudaStream_t stream,
                                int* counters = nullptr, size_t counter_elems = 0);

// out[r, c] = bf16(e4m3(w[r*ldw + c]) * w_scale[(r/128)*ld_scale + c/128]) for r < n, c < k; out is
// [n, k] dense BF16 (the staging copy linear_cuda multiplies with cuBLASLt when m is large).
void fp8_block_dequant_bf16_cuda(const LinearParams& p, uint16_t* out, cudaStream_t stream);

// Per-token, per-128-column FP8 quantization of fp32 activations x [m, k] (k % 128 == 0):
// scale[t, b] = amax(x[t, 128b : 128b + 128]) / 448 (1 when 0), codes[t, c] = e4m3(x[t, c] / scale);
// scales stored [k/128][scale_ld] (tokens fastest) or [m][scale_ld]; scale_ld 0: m, resp. k/128 (dense).
void fp8_quantize_activations_cuda(const float* x, int m, int k, uint8_t* codes, float* scales, bool tokens_fastest,
                                   cudaStream_t stream, int scale_ld = 0);


// ---- Tensor-core FP8 path for 2 <= m <= ~64 tokens (linear_fp8_mma_*) ----
// y[m, n] (=|+=) x[m, k] W^T with mma.sync.m16n8k16 (f16 inputs, fp32 accumulation): A = W (16 output
// rows per m-tile, e4m3 -> f16 exactly in registers), B = x (8 tokens per n-tile). W is loaded straight
// from global memory (16-byte loads, no shared memory) under a k permutation within each 64-column chunk
// (the dot product is invariant when both operands are permuted alike; see linear_fp8.cu).
// Activations: x is fp32 in memory; per (token, 128-column block) it is scaled by the power of two
// 2^e, e = fp8_mma_scale_exp(amax of the block), and rounded to f16 (round to nearest even). The scaling
// is exact, so the only rounding is f16's: |f16(x 2^e) 2^-e - x| <= 2^-11 |x| + 2^-25 2^-e
// <= 2^-11 |x| + 2^-39 amax (the second term: f16 subnormals, for elements 2^-14 below the block's amax).
// That is finer than the BF16 rounding of the dequantize + cuBLASLt path (2^-9). Each 128-column block
// is summed on the tensor core into a temporary, then acc += (w_scale[row block][kb] * 2^-e) * tmp
// (fp32). Bound against exact arithmetic: |y - y_exact| <= (2^-11 + fp32 sum order ~1e-5) * sum |x w|.
// Requires k % 16 == 0, w_stride() % 16 == 0 and w, x 16-byte aligned (linear_fp8_mma_supported);
// other shapes: linear_fp8_gemv_cuda (linear_cuda falls back by itself; a direct call throws).

// Power-of-two scale exponent of a block whose largest |x| is amax: 0 for amax 0, else
// min(126, 14 - floor(log2 amax)), so amax * 2^e lies in [2^14, 2^15) (f16 max 65504) and 2^e, 2^-e are
// both normal fp32 numbers (amax < 2^-112 is clamped to 2^126: scaled values stay below 2^14). Inf/NaN
// amax gives -114 (the non-finite value propagates, as in the CPU twin).
GLM5_HD int fp8_mma_scale_exp(float amax) {
  if (amax == 0.f) return 0;
  if (!(amax <= 3.4028235e38f)) return -114;  // inf or NaN
#ifdef __CUDA_ARCH__
  const int field = int((__float_as_uint(amax) >> 23) & 0xffu);
#else
  uint32_t bits;
  __builtin_memcpy(&bits, &amax, 4);
  const int field = int((bits >> 23) & 0xffu);
#endif
  const int e = field - 127;  // floor(log2 |amax|) for normal amax; -127 for subnormal (then clamped)
  return 14 - e < 126 ? 14 - e : 126;
}

// True when linear_fp8_mma_cuda handles p (see above); linear_cuda uses it to dispatch.
bool linear_fp8_mma_supported(const LinearParams& p);

// Split-K count the kernel uses for p (mt: m-tiles per warp, 0 = default): linear_fp8_mma_cuda's
// `partial` must hold S * m * n floats for S > 1 (null or smaller: no split, fewer blocks).
int linear_fp8_mma_splits(const LinearParams& p, int mt = 0, bool prefetch = false);

// The tensor-core kernel on `stream`. mt in {0 (default: 4 for m <= 32, else 2), 2, 4}: 16-row m-tiles per
// warp (each warp's converted x fragments are reused for mt tiles; 4 is taken as 2 for m > 32, where it
// would spill registers). Tokens: 8 per n-tile, 1 / 2 / 4 / 8 n-tiles per warp for m <= 8 / 16 / 32 / more;
// m > 64 adds CTAs along the token axis (W re-read from L2). Split-K as linear_fp8_gemv_cuda:
// partial sums per split, added in split order (deterministic). Throws glm5::Error on bad params,
// an unsupported shape (naming it) or a launch failure.
// prefetch: issue the next 128-column block's W loads before this block's math (register double
// buffer); only for mt 2 at m <= 16, ignored elsewhere (mt 4 would spill). Same arithmetic either way.
// pdl: launch with the programmatic-dependent-launch attribute (kernels/launch.cuh); false: its CTAs are scheduled
// only after the previous grid completes (LinearContext::fp8_mma_pdl). Same arithmetic either way.
void linear_fp8_mma_cuda(const LinearParams& p, float* partial, size_t partial_elems, cudaStream_t stream, int mt = 0,
                         bool prefetch = false, bool pdl = true);

// CPU twin of linear_fp8_mma_cuda: the same f16 rounding of x with the same power-of-two scales, exact
// products, each 128-column block summed in double, promoted with w_scale * 2^-e in double; fp32 store.
// Differs from the GPU only by the GPU's fp32 summation order. Any k, ldw (no alignment rules).
void linear_fp8_mma_cpu(const LinearParams& p);

}  // namespace glm5
