// Small memory-bound ops of the decode step: embedding lookup, residual add, SwiGLU activation,
// greedy argmax, fp32 -> bf16 conversion.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "common/dtype.h"

namespace glm5 {

struct EmbeddingParams {
  const int32_t* tokens;  // [rows] token ids (must be < vocab; the launcher does not check)
  const void* table;      // [vocab, dim] in `table_dtype` (F32 or BF16)
  DType table_dtype = DType::F32;
  float* out;             // [rows, dim]
  int rows = 0;
  int dim = 0;
};
void embedding_cpu(const EmbeddingParams& p);
void embedding_cuda(const EmbeddingParams& p, cudaStream_t stream);

// y[i] += x[i] for i < n.
struct AddParams {
  float* y;
  const float* x;
  int64_t n = 0;
};
void add_inplace_cpu(const AddParams& p);
void add_inplace_cuda(const AddParams& p, cudaStream_t stream);

// out[r, i] = silu(gate_up[r, i]) * gate_up[r, inter + i]   (gate first, then up, per row)
struct SiluMulParams {
  const float* gate_up;  // [rows, 2*inter]
  float* out;            // [rows, inter]
  int rows = 0;
  int inter = 0;
};
void silu_mul_cpu(const SiluMulParams& p);
void silu_mul_cuda(const SiluMulParams& p, cudaStream_t stream);

// out[r] = argmax_j logits[r, j] (first index on ties).
struct ArgmaxParams {
  const float* logits;  // [rows, n]
  int32_t* out;         // [rows]
  int rows = 0;
  int n = 0;
};
void argmax_cpu(const ArgmaxParams& p);
void argmax_cuda(const ArgmaxParams& p, cudaStream_t stream);

// dst[i] = bf16(src[i]), round to nearest even.
void f32_to_bf16_cuda(const float* src, uint16_t* dst, int64_t n, cudaStream_t stream);

}  // namespace glm5
