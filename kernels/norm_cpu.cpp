// CPU twins of RMSNorm and LayerNorm: plain fp32 loops (sums in double), the reference the CUDA
// kernels and the CPU engine are checked against.
#include <cmath>
#include <string>

#include "common/error.h"
#include "kernels/norm.h"

namespace glm5 {

void validate_norm_params(const NormParams& p, const char* op) {
  const std::string where = std::string(op) + ": NormParams.";
  require(p.x != nullptr, where + "x is null");
  require(p.weight != nullptr, where + "weight is null");
  require(p.y != nullptr, where + "y is null");
  require(p.rows > 0, where + "rows = " + std::to_string(p.rows) + ", expected > 0");
  require(p.dim > 0, where + "dim = " + std::to_string(p.dim) + ", expected > 0");
  require(p.x_stride >= p.dim,
          where + "x_stride = " + std::to_string(p.x_stride) + ", expected >= dim = " + std::to_string(p.dim));
  require(p.y_stride >= p.dim,
          where + "y_stride = " + std::to_string(p.y_stride) + ", expected >= dim = " + std::to_string(p.dim));
  require(p.eps >= 0.f, where + "eps = " + std::to_string(p.eps) + ", expected >= 0");
}

// HF GlmMoeDsaRMSNorm: variance = mean(x^2) in fp32, x * rsqrt(variance + eps), then weight *.
void rmsnorm_cpu(const NormParams& p) {
  validate_norm_params(p, "rmsnorm_cpu");
  for (int r = 0; r < p.rows; ++r) {
    const float* x = p.x + size_t(r) * p.x_stride;
    float* y = p.y + size_t(r) * p.y_stride;
    double sum_sq = 0.0;
    for (int i = 0; i < p.dim; ++i) sum_sq += double(x[i]) * double(x[i]);
    const float variance = float(sum_sq / p.dim);
    const float inv_rms = 1.0f / std::sqrt(variance + p.eps);
    for (int i = 0; i < p.dim; ++i) y[i] = p.weight[i] * (x[i] * inv_rms);
  }
}

// torch.nn.LayerNorm: biased variance, eps inside the square root, then * weight + bias.
void layernorm_cpu(const NormParams& p) {
  validate_norm_params(p, "layernorm_cpu");
  for (int r = 0; r < p.rows; ++r) {
    const float* x = p.x + size_t(r) * p.x_stride;
    float* y = p.y + size_t(r) * p.y_stride;
    double sum = 0.0;
    for (int i = 0; i < p.dim; ++i) sum += x[i];
    const double mean = sum / p.dim;
    double sum_sq = 0.0;
    for (int i = 0; i < p.dim; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
    const float mean_f = float(mean);
    const float inv_std = 1.0f / std::sqrt(float(sum_sq / p.dim) + p.eps);
    for (int i = 0; i < p.dim; ++i) {
      const float b = p.bias ? p.bias[i] : 0.f;
      y[i] = (x[i] - mean_f) * inv_std * p.weight[i] + b;
    }
  }
}

}  // namespace glm5
