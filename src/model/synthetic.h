// Seeded synthetic tensor values, identical on host and device.
//
// Element i of tensor NAME = offset + scale * rng_normal(seed, name_stream(NAME), i), computed as one
// fused multiply-add (fmaf) on both sides so that host and device agree bit for bit, then rounded to
// the stored dtype (BF16 round-to-nearest-even via float_to_bf16_bits, or F32 as is).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/rng.h"

namespace glm5 {

// How one tensor's values are drawn.
struct SyntheticFill {
  uint64_t seed = 0;
  uint64_t stream = 0;  // name_stream(tensor name)
  float scale = 1.f;    // standard deviation (before the Irwin-Hall tail bound)
  float offset = 0.f;   // mean (1 for norm weights)
};

GLM5_HD float synthetic_value(const SyntheticFill& f, uint64_t i) {
  return fmaf(f.scale, rng_normal(f.seed, f.stream, i), f.offset);
}

// The fill of tensor `name` with `shape` (synthetic_weights' scales): nn.Linear weights [out, in] and
// stacked experts [E, out, in] -> N(0, 1/in) (router gate and lm_head included); embed_tokens -> N(0, 1);
// RMSNorm / LayerNorm weights -> 1 + 0.1 N; LayerNorm bias -> 0.1 N; e_score_correction_bias -> 0.01 N.
SyntheticFill synthetic_fill_for(const std::string& name, const std::vector<int64_t>& shape, uint64_t seed);

// FP8 block-quantized synthetic weights (the layout of a GLM-5-FP8 / DeepSeek-V3 checkpoint: e4m3 codes
// plus one fp32 scale_inv per 128x128 block). For `mats` stacked [rows, cols] matrices, block
// (e, rb, cb) (linear index (e*ceil(rows/128) + rb)*ceil(cols/128) + cb) has scale
//   s = f.scale * 3.5 / 448 * (1 + 0.25 u),  u = rng_uniform(seed, stream ^ kSyntheticScaleStream, block)
// (3.5 sigma > the Irwin-Hall tail bound 3.46, so no code saturates; u varies the scales so a wrong
// block index shows), and element i = e4m3(synthetic_value(f, i) / s) (IEEE division, the same bits on
// host and device).
constexpr uint64_t kSyntheticScaleStream = 0x5ca1e5ca1e5ca1e5ull;
GLM5_HD float synthetic_block_scale(const SyntheticFill& f, uint64_t block) {
  return f.scale * (3.5f / 448.f) * (1.f + 0.25f * rng_uniform(f.seed, f.stream ^ kSyntheticScaleStream, block));
}
void synthetic_fill_fp8_host(uint8_t* codes, float* scales, int64_t mats, int64_t rows, int64_t cols,
                             const SyntheticFill& f);
void synthetic_fill_fp8_cuda(uint8_t* codes, float* scales, int64_t mats, int64_t rows, int64_t cols,
                             const SyntheticFill& f, cudaStream_t stream);

// Writes `n` elements of dtype `dtype` (F32 or BF16) at host pointer `out`. Throws glm5::Error for
// other dtypes.
void synthetic_fill_host(void* out, DType dtype, int64_t n, const SyntheticFill& f);

// Same values written by a kernel at device pointer `out`, on `stream` (asynchronous).
void synthetic_fill_cuda(void* out, DType dtype, int64_t n, const SyntheticFill& f, cudaStream_t stream);

}  // namespace glm5
