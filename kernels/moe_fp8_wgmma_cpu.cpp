// CPU twin of the FP8 tensor-core MoE experts (kernels/sm90a/moe_fp8_wgmma.h: moe_experts_fp8_wgmma_cpu).
#include <cmath>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "kernels/moe.h"
#include "kernels/sm90a/moe_fp8_wgmma.h"

namespace glm5 {

namespace {

// row [n] (n % 128 == 0) quantized per 128 columns as the GPU does: scale amax / 448 (1 for 0), codes
// e4m3(v / scale) rounded to nearest even; returns the dequantized codes (code value, unscaled) and the scales.
// bf16: each element rounded to bf16 (nearest even), scales 1.
void quantize_row(const float* row, int n, bool bf16, std::vector<float>& q, std::vector<float>& s) {
  q.assign(size_t(n), 0.f);
  s.assign(size_t(n / 128), 1.f);
  if (bf16) {
    for (int c = 0; c < n; ++c) q[size_t(c)] = round_bf16(row[c]);
    return;
  }
  for (int b = 0; b < n / 128; ++b) {
    float amax = 0.f;
    for (int c = 128 * b; c < 128 * (b + 1); ++c) amax = std::fmax(amax, std::fabs(row[c]));
    const float scale = amax > 0.f ? amax / 448.f : 1.f;
    s[size_t(b)] = scale;
    for (int c = 128 * b; c < 128 * (b + 1); ++c) q[size_t(c)] = e4m3_bits_to_float(float_to_e4m3_bits(row[c] / scale));
  }
}

// sum over 128-column blocks b of (sum_{c in b} q[c] w[c]) * s_x[b] * s_w[b] (double), for W row r of expert e
// ([rows, n] codes, scales [ceil(rows / 128)][n / 128]). BF16 (sw null): sum_c q[c] w[c] in double.
double block_dot(const std::vector<float>& q, const std::vector<float>& sx, const void* wv, const float* sw, int e,
                 int rows, int r, int n) {
  if (!sw) {
    const uint16_t* wr = static_cast<const uint16_t*>(wv) + (size_t(e) * rows + r) * n;
    double acc = 0;
    for (int c = 0; c < n; ++c) acc += double(q[size_t(c)]) * double(bf16_bits_to_float(wr[c]));
    return acc;
  }
  const uint8_t* wr = static_cast<const uint8_t*>(wv) + (size_t(e) * rows + r) * n;
  const float* swr = sw + (size_t(e) * ((rows + 127) / 128) + r / 128) * (n / 128);
  double acc = 0;
  for (int b = 0; b < n / 128; ++b) {
    double blk = 0;
    for (int c = 128 * b; c < 128 * (b + 1); ++c) blk += double(q[size_t(c)]) * double(e4m3_bits_to_float(wr[c]));
    acc += blk * (double(sx[size_t(b)]) * double(swr[b]));
  }
  return acc;
}

}  // namespace

void moe_experts_fp8_wgmma_cpu(const MoeExpertsParams& p) {
  validate_moe_experts_params(p, "moe_experts_fp8_wgmma_cpu", false);
  require(p.w_dtype == DType::F8_E4M3 || p.w_dtype == DType::BF16,
          "moe_experts_fp8_wgmma_cpu: MoeExpertsParams.w_dtype must be F8_E4M3 or BF16");
  const bool bf16 = p.w_dtype == DType::BF16;
  const float* sg = bf16 ? nullptr : p.s_gate;
  const float* su = bf16 ? nullptr : p.s_up;
  const float* sd = bf16 ? nullptr : p.s_down;
  require(p.hidden % 128 == 0 && p.inter % 128 == 0,
          "moe_experts_fp8_wgmma_cpu: hidden and inter must be multiples of 128 (got " + std::to_string(p.hidden) +
              ", " + std::to_string(p.inter) + ")");
  require(!p.shared_gate_up, "moe_experts_fp8_wgmma_cpu: no fused shared expert");
  const void* wg = p.w_gate;
  const void* wu = p.w_up;
  const void* wd = p.w_down;
  std::vector<float> xq, xs, aq, as, act(size_t(p.inter)), pair_out(size_t(p.k) * p.hidden);
  for (int b = 0; b < p.B; ++b) {
    quantize_row(p.x + size_t(b) * p.hidden, p.hidden, bf16, xq, xs);
    std::vector<bool> local(size_t(p.k), false);
    for (int j = 0; j < p.k; ++j) {
      const int pair = b * p.k + j, e = p.topk_ids[pair] - p.expert_begin;
      float* act_out = p.act + size_t(pair) * p.inter;
      if (e < 0 || e >= p.E) {  // another rank's expert
        for (int i = 0; i < p.inter; ++i) act_out[i] = 0.f;
        continue;
      }
      local[size_t(j)] = true;
      for (int i = 0; i < p.inter; ++i) {
        const float g = float(block_dot(xq, xs, wg, sg, e, p.inter, i, p.hidden));
        const float u = float(block_dot(xq, xs, wu, su, e, p.inter, i, p.hidden));
        act[size_t(i)] = g / (1.0f + std::exp(-g)) * u;
      }
      quantize_row(act.data(), p.inter, bf16, aq, as);
      for (int i = 0; i < p.inter; ++i) act_out[i] = aq[size_t(i)] * as[size_t(i / 128)];
      for (int d = 0; d < p.hidden; ++d)
        pair_out[size_t(j) * p.hidden + d] = float(block_dot(aq, as, wd, sd, e, p.hidden, d, p.inter));
    }
    for (int d = 0; d < p.hidden; ++d) {  // moe_combine_kernel's order: the slots' fmaf in slot order
      float sum = 0.f;
      for (int j = 0; j < p.k; ++j)
        if (local[size_t(j)]) sum = std::fma(pair_out[size_t(j) * p.hidden + d], p.topk_weights[b * p.k + j], sum);
      float& o = p.out[size_t(b) * p.hidden + d];
      o = p.accumulate ? o + sum : sum;
    }
  }
}

}  // namespace glm5
