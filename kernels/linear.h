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
};

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

void linear_cuda(const LinearParams& p, LinearContext& ctx, cudaStream_t stream);

}  // namespace glm5
