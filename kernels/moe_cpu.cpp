// CPU twins of MoE routing (HF GlmMoeDsaMoE.route_tokens_to_experts, DeepSeek-V3 noaux_tc) and of the
// routed SwiGLU experts (HF's per-expert loop: down(silu(gate x) * up x) * weight, summed).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/moe.h"
#include "kernels/norm.h"

namespace glm5 {

void validate_moe_route_params(const MoeRouteParams& p, const char* op) {
  const std::string where = std::string(op) + ": MoeRouteParams.";
  require(p.logits != nullptr, where + "logits is null");
  require(p.bias != nullptr, where + "bias is null");
  require(p.topk_ids != nullptr, where + "topk_ids is null");
  require(p.topk_weights != nullptr, where + "topk_weights is null");
  require(p.B > 0, where + "B = " + std::to_string(p.B) + ", expected > 0");
  require(p.E > 0, where + "E = " + std::to_string(p.E) + ", expected > 0");
  require(p.k > 0 && p.k <= p.E,
          where + "k = " + std::to_string(p.k) + ", expected 1 <= k <= E = " + std::to_string(p.E));
  require(p.n_group >= 1 && p.E % p.n_group == 0 && (p.n_group == 1 || p.E / p.n_group >= 2),
          where + "n_group = " + std::to_string(p.n_group) + ", expected a divisor of E = " + std::to_string(p.E) +
              " leaving >= 2 experts per group");
  require(p.topk_group >= 1 && p.topk_group <= p.n_group,
          where + "topk_group = " + std::to_string(p.topk_group) + ", expected 1 <= topk_group <= n_group = " +
              std::to_string(p.n_group));
}

namespace {
// Index of the largest value[i] with !taken[i]; ties go to the lower index.
int take_largest(const std::vector<float>& value, std::vector<char>& taken) {
  int best = -1;
  for (int i = 0; i < int(value.size()); ++i)
    if (!taken[i] && (best < 0 || value[i] > value[best])) best = i;
  taken[best] = 1;
  return best;
}
}  // namespace

void moe_route_cpu(const MoeRouteParams& p) {
  validate_moe_route_params(p, "moe_route_cpu");
  const int group_size = p.E / p.n_group;
  std::vector<float> score(p.E), choice(p.E), group_score(p.n_group);
  std::vector<char> taken;
  for (int b = 0; b < p.B; ++b) {
    const float* logits = p.logits + size_t(b) * p.E;
    for (int e = 0; e < p.E; ++e) {
      score[e] = 1.0f / (1.0f + std::exp(-logits[e]));
      choice[e] = score[e] + p.bias[e];
      if (std::isnan(choice[e])) choice[e] = -std::numeric_limits<float>::infinity();  // NaN never wins (as the kernels)
    }
    // Group score: sum of the two largest choice scores of the group (the largest alone if size 1).
    for (int g = 0; g < p.n_group; ++g) {
      std::vector<float> members(choice.begin() + g * group_size, choice.begin() + (g + 1) * group_size);
      taken.assign(group_size, 0);
      const int first = take_largest(members, taken);
      group_score[g] = members[first];
      if (group_size >= 2) group_score[g] += members[take_largest(members, taken)];
    }
    std::vector<char> group_kept(p.n_group, 0);
    taken.assign(p.n_group, 0);
    for (int i = 0; i < p.topk_group; ++i) group_kept[take_largest(group_score, taken)] = 1;
    // Experts of dropped groups compete with choice score -inf (HF masked_fill(~mask, -inf)).
    std::vector<float> masked(p.E);
    for (int e = 0; e < p.E; ++e) masked[e] = group_kept[e / group_size] ? choice[e] : -std::numeric_limits<float>::infinity();
    taken.assign(p.E, 0);
    int32_t* ids = p.topk_ids + size_t(b) * p.k;
    float* weights = p.topk_weights + size_t(b) * p.k;
    float sum = 0.0f;
    for (int j = 0; j < p.k; ++j) {
      ids[j] = take_largest(masked, taken);
      weights[j] = score[ids[j]];
      sum += weights[j];
    }
    for (int j = 0; j < p.k; ++j) {
      if (p.norm_topk_prob) weights[j] /= (sum + 1e-20f);
      weights[j] *= p.routed_scaling_factor;
    }
  }
}

void validate_moe_experts_params(const MoeExpertsParams& p, const char* op, bool allow_f32_weight) {
  const std::string where = std::string(op) + ": MoeExpertsParams.";
  require(p.x != nullptr, where + "x is null");
  require(p.topk_ids != nullptr, where + "topk_ids is null");
  require(p.topk_weights != nullptr, where + "topk_weights is null");
  require(p.w_gate != nullptr, where + "w_gate is null");
  require(p.w_up != nullptr, where + "w_up is null");
  require(p.w_down != nullptr, where + "w_down is null");
  require(p.act != nullptr, where + "act is null");
  require(p.out != nullptr, where + "out is null");
  const std::pair<const char*, int> dims[] = {{"B", p.B}, {"E", p.E}, {"k", p.k}, {"hidden", p.hidden}, {"inter", p.inter}};
  for (const auto& [name, value] : dims)
    require(value > 0, where + name + " = " + std::to_string(value) + ", expected > 0");
  const bool dtype_ok = p.w_dtype == DType::BF16 || p.w_dtype == DType::F8_E4M3 ||
                        (allow_f32_weight && p.w_dtype == DType::F32);
  require(dtype_ok, where + "w_dtype = " + dtype_name(p.w_dtype) +
                        (allow_f32_weight ? ", expected F32, BF16 or F8_E4M3" : ", expected BF16 or F8_E4M3"));
  if (p.w_dtype == DType::F8_E4M3)
    require(p.s_gate && p.s_up && p.s_down, where + "s_gate / s_up / s_down must be set for F8_E4M3 weights");
  require((p.shared_gate_up == nullptr) == (p.shared_down == nullptr),
          where + "shared_gate_up and shared_down must be set together");
  if (p.shared_gate_up && p.w_dtype == DType::F8_E4M3)
    require(p.s_shared_gate_up && p.s_shared_down,
            where + "s_shared_gate_up / s_shared_down must be set for F8_E4M3 weights");
  require(!p.shared_gate_up || p.w_dtype != DType::F8_E4M3 || p.inter % 128 == 0,
          where + "inter = " + std::to_string(p.inter) + ": a fused FP8 shared expert needs inter % 128 == 0");
  require((p.next_norm_weight == nullptr) == (p.next_norm_out == nullptr),
          where + "next_norm_weight and next_norm_out must be set together");
  require(p.down_early_loads == 0 || p.down_early_loads == 1,
          where + "down_early_loads = " + std::to_string(p.down_early_loads) + ", expected 1 (default) or 0");
  require(p.shared_late_trigger == 0 || p.shared_late_trigger == 1,
          where + "shared_late_trigger = " + std::to_string(p.shared_late_trigger) + ", expected 1 (default) or 0");
}

namespace {
// Dot product of x (n floats) with row `row` of an [rows, n] weight in F32, BF16 or F8_E4M3 (block
// scales `scale`: [rows/128 rounded up, ceil(n/128)] per expert; `rows_per_expert` locates the expert), in double.
double dot_row(const float* x, const void* w, DType dtype, size_t row, int n, const float* scale = nullptr,
               int rows_per_expert = 1) {
  double sum = 0.0;
  if (dtype == DType::F8_E4M3) {
    const uint8_t* r = static_cast<const uint8_t*>(w) + row * n;
    const size_t e = row / rows_per_expert, rr = row % rows_per_expert;
    const int sc = (n + 127) / 128, sr = (rows_per_expert + 127) / 128;
    const float* s = scale + (e * sr + rr / 128) * sc;
    for (int i = 0; i < n; ++i) sum += double(x[i]) * (double(e4m3_bits_to_float(r[i])) * double(s[i / 128]));
  } else if (dtype == DType::F32) {
    const float* r = static_cast<const float*>(w) + row * n;
    for (int i = 0; i < n; ++i) sum += double(x[i]) * double(r[i]);
  } else {
    const uint16_t* r = static_cast<const uint16_t*>(w) + row * n;
    for (int i = 0; i < n; ++i) sum += double(x[i]) * double(bf16_bits_to_float(r[i]));
  }
  return sum;
}
}  // namespace

void moe_experts_cpu(const MoeExpertsParams& p) {
  validate_moe_experts_params(p, "moe_experts_cpu", true);
  require(p.stage == MoeExpertsParams::Stage::All,
          "moe_experts_cpu: MoeExpertsParams.stage must be All (the stages split the CUDA launches only)");
  for (int b = 0; b < p.B; ++b) {
    const float* x = p.x + size_t(b) * p.hidden;
    // The sum starts from 0 (accumulate adds it to out at the end, as a separate residual add would).
    std::vector<float> out(size_t(p.hidden), 0.0f);
    for (int j = 0; j < p.k; ++j) {
      const int total = p.num_experts_total > 0 ? p.num_experts_total : p.E;
      const int id = p.topk_ids[size_t(b) * p.k + j];
      require(id >= 0 && id < total, "moe_experts_cpu: topk_ids[" + std::to_string(b) + "," + std::to_string(j) +
                                         "] = " + std::to_string(id) + ", expected 0 <= id < " + std::to_string(total));
      const int e = id - p.expert_begin;
      if (e < 0 || e >= p.E) continue;  // another rank's expert
      float* act = p.act + (size_t(b) * p.k + j) * p.inter;
      for (int i = 0; i < p.inter; ++i) {
        const float g = float(dot_row(x, p.w_gate, p.w_dtype, size_t(e) * p.inter + i, p.hidden, p.s_gate, p.inter));
        const float u = float(dot_row(x, p.w_up, p.w_dtype, size_t(e) * p.inter + i, p.hidden, p.s_up, p.inter));
        act[i] = g / (1.0f + std::exp(-g)) * u;
      }
      const float weight = p.topk_weights[size_t(b) * p.k + j];
      for (int d = 0; d < p.hidden; ++d)
        out[d] += float(dot_row(act, p.w_down, p.w_dtype, size_t(e) * p.hidden + d, p.inter, p.s_down, p.hidden)) * weight;
    }
    if (p.shared_gate_up) {  // + the shared expert, after the routed slots
      float* act = p.act + (size_t(p.B) * p.k + b) * p.inter;
      for (int i = 0; i < p.inter; ++i) {
        const float g = float(dot_row(x, p.shared_gate_up, p.w_dtype, i, p.hidden, p.s_shared_gate_up, 2 * p.inter));
        const float u =
            float(dot_row(x, p.shared_gate_up, p.w_dtype, size_t(p.inter) + i, p.hidden, p.s_shared_gate_up, 2 * p.inter));
        act[i] = g / (1.0f + std::exp(-g)) * u;
      }
      for (int d = 0; d < p.hidden; ++d)
        out[d] += float(dot_row(act, p.shared_down, p.w_dtype, d, p.inter, p.s_shared_down, p.hidden));
    }
    float* o = p.out + size_t(b) * p.hidden;
    for (int d = 0; d < p.hidden; ++d) o[d] = p.accumulate ? o[d] + out[d] : out[d];
  }
  if (p.next_norm_weight) {  // the next layer's input norm of the result rows (MoeExpertsParams::next_norm_weight)
    NormParams np{p.out, p.next_norm_weight, nullptr, p.next_norm_out, p.B, p.hidden, p.hidden, p.hidden, p.next_norm_eps};
    rmsnorm_cpu(np);
  }
}

}  // namespace glm5
