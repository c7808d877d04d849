// The tensor lists a config implies (weights.h: expected_tensors, stored_tensor_specs, and the name / shape strings
// they use): CPU-only and free of the
// CUDA runtime, so the config parser's size check (config.cpp) and the fuzz targets (tools/fuzz.sh) link it alone.
#include <string>
#include <vector>

#include "common/error.h"
#include "model/weights.h"

namespace glm5 {

std::string layer_prefix(int i) { return "model.layers." + std::to_string(i) + "."; }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

namespace {

// Everything of one decoder layer except the MLP (shared by expected and stored lists).
void attention_specs(const ModelConfig& c, int i, std::vector<TensorSpec>& v) {
  const std::string p = layer_prefix(i);
  const int64_t H = c.hidden_size, nh = c.num_attention_heads;
  v.push_back({p + "input_layernorm.weight", {H}});
  v.push_back({p + "post_attention_layernorm.weight", {H}});
  v.push_back({p + "self_attn.q_a_proj.weight", {c.q_lora_rank, H}});
  v.push_back({p + "self_attn.q_a_layernorm.weight", {c.q_lora_rank}});
  v.push_back({p + "self_attn.q_b_proj.weight", {nh * (int64_t(c.qk_nope_head_dim) + c.qk_rope_head_dim), c.q_lora_rank}});
  v.push_back({p + "self_attn.kv_a_proj_with_mqa.weight", {int64_t(c.kv_lora_rank) + c.qk_rope_head_dim, H}});
  v.push_back({p + "self_attn.kv_a_layernorm.weight", {c.kv_lora_rank}});
  v.push_back({p + "self_attn.kv_b_proj.weight", {nh * (int64_t(c.qk_nope_head_dim) + c.v_head_dim), c.kv_lora_rank}});
  v.push_back({p + "self_attn.o_proj.weight", {H, nh * c.v_head_dim}});
  if (c.has_indexer) {
    const std::string q = p + "self_attn.indexer.";
    v.push_back({q + "wq_b.weight", {int64_t(c.index_n_heads) * c.index_head_dim, c.q_lora_rank}});
    v.push_back({q + "wk.weight", {c.index_head_dim, H}});
    v.push_back({q + "k_norm.weight", {c.index_head_dim}});
    v.push_back({q + "k_norm.bias", {c.index_head_dim}});
    v.push_back({q + "weights_proj.weight", {c.index_n_heads, H}});
  }
}

void mlp_specs(const ModelConfig& c, int i, bool stacked, std::vector<TensorSpec>& v) {
  const std::string p = layer_prefix(i) + "mlp.";
  const int64_t H = c.hidden_size;
  if (!c.layer_is_moe[i]) {
    v.push_back({p + "gate_proj.weight", {c.intermediate_size, H}});
    v.push_back({p + "up_proj.weight", {c.intermediate_size, H}});
    v.push_back({p + "down_proj.weight", {H, c.intermediate_size}});
    return;
  }
  const int64_t E = c.n_routed_experts, I = c.moe_intermediate_size;
  v.push_back({p + "gate.weight", {E, H}});
  v.push_back({p + "gate.e_score_correction_bias", {E}});
  if (stacked) {
    v.push_back({p + "experts.gate_proj.weight", {E, I, H}});
    v.push_back({p + "experts.up_proj.weight", {E, I, H}});
    v.push_back({p + "experts.down_proj.weight", {E, H, I}});
  } else {
    for (int e = 0; e < E; ++e) {
      const std::string q = p + "experts." + std::to_string(e) + ".";
      v.push_back({q + "gate_proj.weight", {I, H}});
      v.push_back({q + "up_proj.weight", {I, H}});
      v.push_back({q + "down_proj.weight", {H, I}});
    }
  }
  if (c.n_shared_experts > 0) {
    const int64_t S = int64_t(c.n_shared_experts) * I;
    v.push_back({p + "shared_experts.gate_proj.weight", {S, H}});
    v.push_back({p + "shared_experts.up_proj.weight", {S, H}});
    v.push_back({p + "shared_experts.down_proj.weight", {H, S}});
  }
}

std::vector<TensorSpec> specs(const ModelConfig& c, bool stacked) {
  require(int(c.layer_is_moe.size()) == c.num_hidden_layers,
          "model config '" + c.name + "': layer_is_moe has " + std::to_string(c.layer_is_moe.size()) +
              " entries, num_hidden_layers is " + std::to_string(c.num_hidden_layers));
  std::vector<TensorSpec> v;
  v.push_back({"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}});
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    attention_specs(c, i, v);
    mlp_specs(c, i, stacked, v);
  }
  v.push_back({"model.norm.weight", {c.hidden_size}});
  v.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}});
  return v;
}

}  // namespace

std::vector<TensorSpec> expected_tensors(const ModelConfig& cfg) { return specs(cfg, false); }
std::vector<TensorSpec> stored_tensor_specs(const ModelConfig& cfg) { return specs(cfg, true); }

}  // namespace glm5
