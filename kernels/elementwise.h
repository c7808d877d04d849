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
// silu(g) = g / (1 + exp(-g)) (torch.nn.functional.silu).
struct SiluMulParams {
  const float* gate_up;  // [rows, 2*inter]
  float* out;            // [rows, inter]
  int rows = 0;
  int inter = 0;
};
void silu_mul_cpu(const SiluMulParams& p);
void silu_mul_cuda(const SiluMulParams& p, cudaStream_t stream);

// out[r] = argmax_j logits[r, j] (first index on ties; NaN counts as -inf, so a row of NaN gives 0).
struct ArgmaxParams {
  const float* logits;  // [rows, n]
  int32_t* out;         // [rows]
  int rows = 0;
  int n = 0;
};
void argmax_cpu(const ArgmaxParams& p);
void argmax_cuda(const ArgmaxParams& p, cudaStream_t stream);

// Parameter checks shared by both twins: throw glm5::Error naming `op` and the field unless the
// pointers are non-null, the sizes positive and (embedding) the table F32 or BF16.
void validate_embedding_params(const EmbeddingParams& p, const char* op);
void validate_add_params(const AddParams& p, const char* op);
void validate_silu_mul_params(const SiluMulParams& p, const char* op);
void validate_argmax_params(const ArgmaxParams& p, const char* op);

// dst[i] = bf16(src[i]), round to nearest even.
void f32_to_bf16_cuda(const float* src, uint16_t* dst, int64_t n, cudaStream_t stream);

}  // namespace glm5
