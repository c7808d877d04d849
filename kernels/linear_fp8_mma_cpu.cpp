// CPU twin of linear_fp8_mma_cuda (kernels/linear_fp8.h): x scaled per (token, 128-column block) by
// 2^fp8_mma_scale_exp(amax) and rounded to f16, multiplied exactly by the e4m3 weight codes, each block
// summed in double and promoted with w_scale * 2^-e. The GPU sums the same exact products in fp32
// (tensor core) and promotes in fp32: the two differ by fp32 summation order only.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "kernels/linear_fp8.h"

namespace glm5 {

void linear_fp8_mma_cpu(const LinearParams& p) {
  validate_linear_params(p, "linear_fp8_mma_cpu", false);
  require(p.w_dtype == DType::F8_E4M3, "linear_fp8_mma_cpu: LinearParams.w_dtype = " + dtype_name(p.w_dtype) +
                                           ", expected F8_E4M3");
  const int kbs = (p.k + kFp8WeightBlock - 1) / kFp8WeightBlock;
  const uint8_t* w8 = static_cast<const uint8_t*>(p.w);
  std::vector<float> xh(static_cast<size_t>(p.k));
  std::vector<double> inv(static_cast<size_t>(kbs));
  for (int i = 0; i < p.m; ++i) {
    const float* x = p.x + size_t(i) * p.k;
    for (int b = 0; b < kbs; ++b) {
      const int c0 = b * kFp8WeightBlock, c1 = std::min(p.k, c0 + kFp8WeightBlock);
      float amax = 0.f;
      for (int c = c0; c < c1; ++c) amax = std::fmax(amax, std::fabs(x[c]));  // NaN ignored, as fmaxf
      const int e = fp8_mma_scale_exp(amax);
      const float scale = std::ldexp(1.f, e);
      inv[size_t(b)] = std::ldexp(1.0, -e);
      for (int c = c0; c < c1; ++c) xh[size_t(c)] = round_f16(x[c] * scale);  // fp32 product, as the GPU
    }
    float* y = p.y + size_t(i) * p.n;
    for (int j = 0; j < p.n; ++j) {
      const uint8_t* wr = w8 + size_t(j) * p.w_stride();
      const float* srow = p.w_scale + size_t(j / kFp8WeightBlock) * p.scale_stride();
      double acc = 0.0;
      for (int b = 0; b < kbs; ++b) {
        const int c0 = b * kFp8WeightBlock, c1 = std::min(p.k, c0 + kFp8WeightBlock);
        double tmp = 0.0;
        for (int c = c0; c < c1; ++c) tmp += double(e4m3_bits_to_float(wr[c])) * double(xh[size_t(c)]);
        acc += double(srow[b]) * inv[size_t(b)] * tmp;
      }
      y[j] = p.accumulate ? y[j] + float(acc) : float(acc);
    }
  }
}

}  // namespace glm5
