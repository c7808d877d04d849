#include "engine/step_floor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "kernels/kv_layout.h"

namespace glm5 {

StepFloor step_floor(const ModelConfig& c, const StepFloorInput& in) {
  require(in.batch >= 1, "step floor: batch must be >= 1, got " + std::to_string(in.batch));
  require(in.context >= 0, "step floor: context must be >= 0, got " + std::to_string(in.context));
  require(in.tp >= 1, "step floor: tp must be >= 1, got " + std::to_string(in.tp));
  auto shard = [&](double n, const char* what) {
    require(std::fmod(n, double(in.tp)) == 0, std::string("step floor: tp ") + std::to_string(in.tp) +
                                                  " does not divide " + what);
    return n / in.tp;
  };
  const double w = in.weight_bytes_per_element, H = c.hidden_size, B = in.batch;
  const double heads = shard(c.num_attention_heads, "num_attention_heads");
  StepFloor f;
  const double norms = 4.0 * (2 * H + c.q_lora_rank + c.kv_lora_rank);  // fp32 RMSNorm weights per layer
  const double attn = w * (H * c.q_lora_rank + heads * c.qk_head_dim() * c.q_lora_rank +
                           H * (c.kv_lora_rank + c.qk_rope_head_dim) +
                           heads * (c.qk_nope_head_dim + c.v_head_dim) * c.kv_lora_rank + H * heads * c.v_head_dim);
  const double indexer = w * (double(c.index_n_heads) * c.index_head_dim * c.q_lora_rank + double(c.index_head_dim) * H +
                              double(c.index_n_heads) * H) +
                         4.0 * 2 * c.index_head_dim;  // + LayerNorm weight and bias
  const double E = c.n_routed_experts, K = c.num_experts_per_tok;
  const double local_experts = E > 0 ? shard(E, "n_routed_experts") : 0;
  // P(an expert is picked by none of B tokens) = (1 - K/E)^B under uniform routing.
  f.expected_experts_per_layer = E > 0 ? local_experts * (1.0 - std::pow(1.0 - K / E, B)) : 0;
  const double expert = w * 3.0 * H * c.moe_intermediate_size;
  const double shared_inter = shard(double(c.moe_intermediate_size) * std::max(1, c.n_shared_experts),
                                    "moe_intermediate_size x n_shared_experts");
  const double dense_inter = shard(c.intermediate_size, "intermediate_size");
  const LatentLayout lay = make_latent_layout(c.kv_lora_rank, c.qk_rope_head_dim, in.kv_fp8);
  const double idx_row = c.has_indexer ? double(IndexerLayout{c.index_head_dim, in.kv_fp8}.bytes_per_token()) : 0;
  const double ctx = in.context;
  const double rows_read = c.has_indexer ? std::min(ctx, double(c.index_topk)) : ctx;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const bool moe = l < int(c.layer_is_moe.size()) && c.layer_is_moe[l];
    const bool own_indexer = c.has_indexer && !(l < int(c.indexer_shared.size()) && c.indexer_shared[l]);
    f.attention_weight_bytes += attn + norms + (own_indexer ? indexer : 0);
    if (moe) {
      f.router_bytes += w * E * H + 4.0 * E;  // router weight + e_score_correction_bias
      f.shared_expert_bytes += w * 3.0 * H * shared_inter;
      f.routed_expert_bytes += f.expected_experts_per_layer * expert;
    } else {
      f.dense_mlp_bytes += w * 3.0 * H * dense_inter;
    }
    f.kv_bytes += B * (ctx * idx_row * (own_indexer ? 1 : 0) + rows_read * lay.row_bytes);
  }
  f.embed_lm_head_bytes = w * B * H + w * double(c.vocab_size) * H + 4.0 * H;  // + final norm
  f.total_bytes = f.attention_weight_bytes + f.dense_mlp_bytes + f.router_bytes + f.shared_expert_bytes +
                  f.routed_expert_bytes + f.embed_lm_head_bytes + f.kv_bytes;
  f.floor_us = in.copy_gbps > 0 ? f.total_bytes / (in.copy_gbps * 1e3) : 0;
  return f;
}

StepFloor step_floor(const ModelConfig& c, const Weights& w, StepFloorInput& in) {
  in.weight_bytes_per_element = 0;
  StepFloor f = step_floor(c, in);  // checks the inputs; KV bytes and the expert count
  const double tp = in.tp;
  f.attention_weight_bytes = f.dense_mlp_bytes = f.router_bytes = f.shared_expert_bytes = f.routed_expert_bytes = 0;
  f.embed_lm_head_bytes = 0;
  bool fp8 = false;
  auto ends = [](const std::string& s, const char* suffix) {
    const size_t n = std::char_traits<char>::length(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
  };
  for (const auto& [name, t] : w.tensors()) {
    const double bytes = double(t.bytes());
    fp8 |= t.dtype == DType::F8_E4M3;
    if (name == "model.embed_tokens.weight") {
      if (!t.shape.empty() && t.shape[0] > 0) f.embed_lm_head_bytes += bytes / double(t.shape[0]) * in.batch;
      continue;
    }
    if (name == "lm_head.weight" || name == "model.norm.weight") {
      f.embed_lm_head_bytes += bytes;
      continue;
    }
    const std::string pre = "model.layers.";
    if (name.rfind(pre, 0) != 0) continue;
    const size_t dot = name.find('.', pre.size());
    if (dot == std::string::npos) continue;
    const int layer = std::atoi(name.substr(pre.size(), dot - pre.size()).c_str());
    if (layer < 0 || layer >= c.num_hidden_layers) continue;
    const std::string rest = name.substr(dot + 1);
    if (rest.rfind("self_attn.indexer.", 0) == 0) {
      const bool shared = layer < int(c.indexer_shared.size()) && c.indexer_shared[layer];
      if (!shared) f.attention_weight_bytes += bytes;
    } else if (rest == "self_attn.q_b_proj.weight" || rest == "self_attn.kv_b_proj.weight" ||
               rest == "self_attn.o_proj.weight") {
      f.attention_weight_bytes += bytes / tp;  // head-sharded
    } else if (rest.rfind("self_attn.", 0) == 0 || ends(rest, "layernorm.weight")) {
      f.attention_weight_bytes += bytes;
    } else if (rest.rfind("mlp.gate.", 0) == 0) {
      f.router_bytes += bytes;
    } else if (rest.rfind("mlp.shared_experts.", 0) == 0) {
      f.shared_expert_bytes += bytes / tp;
    } else if (rest.rfind("mlp.experts.", 0) == 0) {
      if (!t.shape.empty() && t.shape[0] > 0)  // stacked [E, ...]: one expert's share
        f.routed_expert_bytes += bytes / double(t.shape[0]) * f.expected_experts_per_layer;
    } else if (rest.rfind("mlp.", 0) == 0) {
      f.dense_mlp_bytes += bytes / tp;
    }
  }
  if (fp8) in.weights_dtype = "fp8";
  else if (w.has("lm_head.weight")) {
    const std::string n = dtype_name(w.get("lm_head.weight").dtype);
    in.weights_dtype = n == "BF16" ? "bf16" : n == "F32" ? "f32" : n;
  }
  f.total_bytes = f.attention_weight_bytes + f.dense_mlp_bytes + f.router_bytes + f.shared_expert_bytes +
                  f.routed_expert_bytes + f.embed_lm_head_bytes + f.kv_bytes;
  f.floor_us = in.copy_gbps > 0 ? f.total_bytes / (in.copy_gbps * 1e3) : 0;
  return f;
}

nlohmann::json to_json(const StepFloor& f, const StepFloorInput& in) {
  return nlohmann::json{
      {"floor_us", f.floor_us},
      {"total_bytes", f.total_bytes},
      {"bytes", {{"attention_weights", f.attention_weight_bytes},
                 {"dense_mlp", f.dense_mlp_bytes},
                 {"router", f.router_bytes},
                 {"shared_expert", f.shared_expert_bytes},
                 {"routed_experts", f.routed_expert_bytes},
                 {"embed_lm_head", f.embed_lm_head_bytes},
                 {"kv", f.kv_bytes}}},
      {"experts_per_moe_layer", f.expected_experts_per_layer},
      {"experts_basis", "expected distinct experts under uniform random routing: E(1 - (1 - K/E)^batch)"},
      {"batch", in.batch},
      {"context", in.context},
      {"kv_dtype", in.kv_fp8 ? "fp8" : "bf16"},
      {"weights_dtype", in.weights_dtype},
      {"weight_bytes", in.weight_bytes_per_element > 0
                           ? "config x " + std::to_string(in.weight_bytes_per_element) + " bytes per parameter"
                           : std::string("the loaded tensors as stored (dtype; FP8 block scales included)")},
      {"tp", in.tp},
      {"copy_gbps", in.copy_gbps},
      {"definition", "bytes a step must read (weights once, the selected experts, indexer keys of the context and the "
                     "top-k latent rows) / measured copy bandwidth"}};
}

}  // namespace glm5
