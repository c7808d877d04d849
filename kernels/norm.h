// RMSNorm and LayerNorm over the last dimension, fp32 in and out.
// RMSNorm (HF GlmMoeDsaRMSNorm): y = w * x * rsqrt(mean(x^2) + eps).
// LayerNorm (torch.nn.LayerNorm, the indexer's k_norm): y = (x - mean) * rsqrt(var + eps) * w + b,
// var the biased variance.
#pragma once
#include <cuda_runtime.h>

namespace glm5 {

struct NormParams {
  const float* x;       // [rows, dim], rows `x_stride` floats apart
  const float* weight;  // [dim]
  const float* bias;    // [dim] LayerNorm only (may be null: no bias)
  float* y;             // [rows, dim], rows `y_stride` floats apart; may equal x (in place)
  int rows = 0;
  int dim = 0;
  int x_stride = 0;
  int y_stride = 0;
  float eps = 1e-6f;
};

// Throws glm5::Error naming the field unless the pointers are non-null (bias may be null), rows > 0,
// dim > 0 and both strides >= dim. `op` names the caller in the message. Both twins call it.
void validate_norm_params(const NormParams& p, const char* op);

void rmsnorm_cpu(const NormParams& p);
void rmsnorm_cuda(const NormParams& p, cudaStream_t stream);
void layernorm_cpu(const NormParams& p);
void layernorm_cuda(const NormParams& p, cudaStream_t stream);

}  // namespace glm5
