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

// Writes `n` elements of dtype `dtype` (F32 or BF16) at host pointer `out`. Throws glm5::Error for
// other dtypes.
void synthetic_fill_host(void* out, DType dtype, int64_t n, const SyntheticFill& f);

// Same values written by a kernel at device pointer `out`, on `stream` (asynchronous).
void synthetic_fill_cuda(void* out, DType dtype, int64_t n, const SyntheticFill& f, cudaStream_t stream);

}  // namespace glm5
