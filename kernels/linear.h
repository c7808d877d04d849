// Projections y = x W^T (nn.Linear without bias). CPU: plain loops in fp32. CUDA: cuBLASLt with
// BF16 weights and BF16-rounded activations, fp32 accumulation and fp32 output.
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "common/dtype.h"

namespace glm5 {

struct LinearParams {
  const float* x;      // [m, k] activations, fp32, row-major
  const void* w;       // [n, k] weight in `w_dtype` (HF layout: out_features x in_features)
  DType w_dtype = DType::F32;  // CPU: F32 or BF16; CUDA: BF16
  float* y;            // [m, n] fp32 output
  int m = 0;
  int n = 0;
  int k = 0;
  bool accumulate = false;  // y += x W^T instead of y = x W^T
  // CUDA only: carry x as two bf16 halves, x ~ hi + lo (hi = bf16(x), lo = bf16(x - hi): ~16 mantissa
  // bits instead of 8), as one GEMM over 2m rows (the weight is read once) plus a small sum kernel:
  // the GPU engine then tracks the fp32 CPU reference (see ActivationPrecision in decode_engine.h).
  bool split_bf16 = false;
  // Elements between rows of w (0: k). A tensor-parallel shard that takes columns [c0, c0 + k) of a
  // [n, K] weight passes w + c0 and ldw = K (row-parallel o_proj / down_proj of DESIGN.md's --tp).
  int ldw = 0;
  int w_stride() const { return ldw > 0 ? ldw : k; }
};

// Throws glm5::Error naming `op` and the field unless x, w, y are non-null, m, n, k > 0 and w_dtype
// is BF16 (or F32 when allow_f32_weight: the CPU twin).
void validate_linear_params(const LinearParams& p, const char* op, bool allow_f32_weight);

// y[m, n] (=|+=) sum_k x[m, k] * w[n, k], dot products accumulated in double, stored as fp32.
void linear_cpu(const LinearParams& p);

// cuBLASLt handle, workspace and a bf16 staging buffer for activations; one per engine/stream.
class LinearContext {
 public:
  LinearContext();
  ~LinearContext();
  LinearContext(const LinearContext&) = delete;
  LinearContext& operator=(const LinearContext&) = delete;
  struct Impl;
  Impl* impl() { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

// y = x W^T on `stream` via cublasLtMatmul: x is rounded to BF16 into the context's staging buffer
// (grown on demand: the first call with a new largest m*k allocates, so warm up before graph
// capture), W BF16, fp32 accumulation (CUBLAS_COMPUTE_32F) and fp32 y; accumulate uses beta = 1.
// Throws glm5::Error on bad params or any cuBLASLt failure (status named).
void linear_cuda(const LinearParams& p, LinearContext& ctx, cudaStream_t stream);

}  // namespace glm5
