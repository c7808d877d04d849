// CPU twin of the block-scaled FP8 tensor-core GEMM (kernels/sm90a/linear_fp8_wgmma.h): the same per-token,
// per-128-column e4m3 quantization of x (fp8_quantize_activations_cuda's arithmetic: scale = amax / 448 in fp32, 1
// for an all-zero block; code = e4m3(x / scale), round to nearest even, saturating), exact block sums in double,
// promoted with s_x s_w in double. The GPU differs by its fp32 accumulation and promotion order only.
#include <cmath>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "kernels/sm90a/linear_fp8_wgmma.h"

namespace glm5 {

void linear_fp8_wgmma_cpu(const LinearParams& p) {
  validate_linear_params(p, "linear_fp8_wgmma_cpu", false);
  require(p.w_dtype == DType::F8_E4M3 && p.w_scale, "linear_fp8_wgmma_cpu: FP8 weights with block scales");
  require(p.k % kFp8WeightBlock == 0, "linear_fp8_wgmma_cpu: k = " + std::to_string(p.k) + " must be a multiple of 128");
  const int KB = p.k / kFp8WeightBlock;
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  std::vector<float> xq(static_cast<size_t>(p.k)), sx(static_cast<size_t>(KB));
  for (int t = 0; t < p.m; ++t) {
    const float* x = p.x + size_t(t) * p.k;
    for (int b = 0; b < KB; ++b) {
      float amax = 0.f;
      for (int c = 128 * b; c < 128 * (b + 1); ++c) amax = std::fmax(amax, std::fabs(x[c]));
      const float scale = amax > 0.f ? amax / 448.f : 1.f;
      sx[b] = scale;
      for (int c = 128 * b; c < 128 * (b + 1); ++c) xq[c] = e4m3_bits_to_float(float_to_e4m3_bits(x[c] / scale));
    }
    for (int r = 0; r < p.n; ++r) {
      const uint8_t* wr = w + size_t(r) * p.w_stride();
      const float* sw = p.w_scale + size_t(r / kFp8WeightBlock) * p.scale_stride();
      double acc = 0;
      for (int b = 0; b < KB; ++b) {
        double blk = 0;
        for (int c = 128 * b; c < 128 * (b + 1); ++c) blk += double(xq[c]) * double(e4m3_bits_to_float(wr[c]));
        acc += blk * (double(sx[b]) * double(sw[b]));
      }
      float& y = p.y[size_t(t) * p.n + r];
      y = p.accumulate ? float(double(y) + acc) : float(acc);
    }
  }
}

}  // namespace glm5
