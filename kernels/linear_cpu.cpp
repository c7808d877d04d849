// CPU twin of the projection y = x W^T (nn.Linear without bias): plain loops, double accumulators.
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/linear.h"
#include "kernels/norm.h"
#include "kernels/rope.h"

namespace glm5 {

void validate_linear_params(const LinearParams& p, const char* op, bool allow_f32_weight) {
  const std::string where = std::string(op) + ": LinearParams.";
  require(p.x != nullptr, where + "x is null");
  require(p.w != nullptr, where + "w is null");
  require(p.y != nullptr, where + "y is null");
  require(p.m > 0, where + "m = " + std::to_string(p.m) + ", expected > 0");
  require(p.n > 0, where + "n = " + std::to_string(p.n) + ", expected > 0");
  require(p.k > 0, where + "k = " + std::to_string(p.k) + ", expected > 0");
  require(p.ldw == 0 || p.ldw >= p.k, where + "ldw = " + std::to_string(p.ldw) + ", expected 0 or >= k");
  const bool dtype_ok = p.w_dtype == DType::BF16 || p.w_dtype == DType::F8_E4M3 ||
                        (allow_f32_weight && p.w_dtype == DType::F32);
  require(dtype_ok, where + "w_dtype = " + dtype_name(p.w_dtype) +
                        (allow_f32_weight ? ", expected F32, BF16 or F8_E4M3" : ", expected BF16 or F8_E4M3"));
  if (p.w_dtype == DType::F8_E4M3) {
    require(p.w_scale != nullptr, where + "w_scale is null (F8_E4M3 weights need their 128x128 block scales)");
    require(p.ld_scale == 0 || p.ld_scale >= (p.k + 127) / 128,
            where + "ld_scale = " + std::to_string(p.ld_scale) + ", expected 0 or >= ceil(k/128)");
  }
}

void linear_cpu(const LinearParams& p) {
  validate_linear_params(p, "linear_cpu", true);
  const bool bf16 = p.w_dtype == DType::BF16, fp8 = p.w_dtype == DType::F8_E4M3;
  const uint8_t* w8 = static_cast<const uint8_t*>(p.w);
  const float* wf = static_cast<const float*>(p.w);
  const uint16_t* wb = static_cast<const uint16_t*>(p.w);
  for (int i = 0; i < p.m; ++i) {
    const float* x = p.x + size_t(i) * p.k;
    float* y = p.y + size_t(i) * p.n;
    for (int j = 0; j < p.n; ++j) {
      const size_t row = size_t(j) * p.w_stride();
      double sum = 0.0;
      if (fp8) {  // e4m3 code x its 128x128 block scale (the value the checkpoint stores)
        const float* srow = p.w_scale + size_t(j / kFp8WeightBlock) * p.scale_stride();
        for (int c = 0; c < p.k; ++c)
          sum += double(x[c]) * (double(e4m3_bits_to_float(w8[row + c])) * double(srow[c / kFp8WeightBlock]));
      } else if (bf16) {
        for (int c = 0; c < p.k; ++c) sum += double(x[c]) * double(bf16_bits_to_float(wb[row + c]));
      } else {
        for (int c = 0; c < p.k; ++c) sum += double(x[c]) * double(wf[row + c]);
      }
      y[j] = p.accumulate ? y[j] + float(sum) : float(sum);  // as torch: residual + (x W^T)
    }
  }
}

bool output_rope_foldable(const RopeParams& r, const LinearParams& p) {
  return r.x == p.y && r.rows == p.m && r.row_stride == p.n && int64_t(r.heads) * r.head_stride == p.n &&
         r.interleave && r.offset % 2 == 0 && r.head_stride % 2 == 0 && !p.accumulate;
}

bool linear_group_has_rope(const LinearGroupParams& g) {
  for (int s = 0; s < g.count && s < kMaxLinearGroup; ++s)
    if (g.rope[s].positions) return true;
  return false;
}

void validate_linear_group(const LinearGroupParams& g, const char* op, bool allow_f32_weight) {
  require(g.count >= 1 && g.count <= kMaxLinearGroup, std::string(op) + ": LinearGroupParams.count = " +
                                                          std::to_string(g.count) + ", expected 1.." +
                                                          std::to_string(kMaxLinearGroup));
  for (int s = 0; s < g.count; ++s) validate_linear_params(g.p[s], op, allow_f32_weight);
  for (int s = 0; s < g.count; ++s) {
    const RopeParams& r = g.rope[s];
    if (!r.positions) continue;
    const std::string where = std::string(op) + ": LinearGroupParams.rope[" + std::to_string(s) + "]";
    validate_rope_params(r, where.c_str());
    require(output_rope_foldable(r, g.p[s]), where + ": expected x = the projection's y, rows = m, row_stride = n, "
                                                     "heads * head_stride = n, interleaved pairs, an even offset and "
                                                     "head_stride, and accumulate off");
  }
  if (!g.norm.weight) return;
  require(g.norm.eps >= 0.f && std::isfinite(g.norm.eps),
          std::string(op) + ": LinearGroupParams.norm.eps = " + std::to_string(g.norm.eps) + ", expected finite >= 0");
  for (int s = 1; s < g.count; ++s)
    require(g.p[s].x == g.p[0].x && g.p[s].m == g.p[0].m && g.p[s].k == g.p[0].k,
            std::string(op) + ": LinearGroupParams.norm needs every projection to read the same x (same pointer, m, k)");
}

void linear_group_cpu(const LinearGroupParams& g) {
  validate_linear_group(g, "linear_group_cpu", true);
  std::vector<float> xn;
  if (g.norm.weight) {
    const int m = g.p[0].m, k = g.p[0].k;
    xn.resize(size_t(m) * k);
    rmsnorm_cpu(NormParams{g.p[0].x, g.norm.weight, nullptr, xn.data(), m, k, k, k, g.norm.eps});
  }
  for (int s = 0; s < g.count; ++s) {
    LinearParams p = g.p[s];
    if (g.norm.weight) p.x = xn.data();
    linear_cpu(p);
    if (g.rope[s].positions) rope_cpu(g.rope[s]);
  }
}

}  // namespace glm5
