// Built-in model configs, embedded verbatim so the binary works without the shared/ folder.
// Generated from the files named beside each entry; tests/model/test_config.cpp checks they still match
// (deepseek-v32 has no shared/ file: the test checks it against deepseek-v3 plus the indexer keys).
#include "model/builtin_configs.h"

#include <cstring>

namespace glm5 {

namespace {

struct Builtin {
  const char* name;
  const char* json;
};

const Builtin kBuiltins[] = {
    // /work/shared/configs/glm5.json (zai-org/GLM-5 config.json)
    {"glm5", R"json({
  "architectures": [
    "GlmMoeDsaForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "dtype": "bfloat16",
  "eos_token_id": [
    154820,
    154827,
    154829
  ],
  "ep_size": 1,
  "first_k_dense_replace": 3,
  "hidden_act": "silu",
  "head_dim": 64,
  "hidden_size": 6144,
  "index_head_dim": 128,
  "index_n_heads": 32,
  "index_topk": 2048,
  "indexer_rope_interleave": true,
  "initializer_range": 0.02,
  "intermediate_size": 12288,
  "kv_lora_rank": 512,
  "max_position_embeddings": 202752,
  "moe_intermediate_size": 2048,
  "moe_layer_freq": 1,
  "model_type": "glm_moe_dsa",
  "n_group": 1,
  "n_routed_experts": 256,
  "n_shared_experts": 1,
  "norm_topk_prob": true,
  "num_attention_heads": 64,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 78,
  "num_key_value_heads": 64,
  "num_nextn_predict_layers": 1,
  "pad_token_id": 154820,
  "pretraining_tp": 1,
  "q_lora_rank": 2048,
  "qk_head_dim": 256,
  "qk_nope_head_dim": 192,
  "qk_rope_head_dim": 64,
  "rms_norm_eps": 1e-05,
  "rope_interleave": true,
  "rope_parameters": {
    "rope_theta": 1000000,
    "rope_type": "default"
  },
  "routed_scaling_factor": 2.5,
  "scoring_func": "sigmoid",
  "tie_word_embeddings": false,
  "topk_group": 1,
  "topk_method": "noaux_tc",
  "transformers_version": "5.0.2.dev0",
  "use_cache": true,
  "v_head_dim": 256,
  "vocab_size": 154880
})json"},
    // /work/shared/golden/glm5-tiny/config.json (golden checkpoint, written by transformers 5.17)
    {"glm5-tiny", R"json({
  "architectures": [
    "GlmMoeDsaForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 0,
  "dtype": "bfloat16",
  "eos_token_id": 1,
  "first_k_dense_replace": 1,
  "head_dim": 32,
  "hidden_act": "silu",
  "hidden_size": 256,
  "index_head_dim": 64,
  "index_n_heads": 16,
  "index_topk": 16,
  "indexer_types": [
    "full",
    "full",
    "full",
    "full"
  ],
  "initializer_range": 0.08,
  "intermediate_size": 512,
  "kv_lora_rank": 64,
  "layer_types": [
    "deepseek_sparse_attention",
    "deepseek_sparse_attention",
    "deepseek_sparse_attention",
    "deepseek_sparse_attention"
  ],
  "max_position_embeddings": 4096,
  "mlp_bias": false,
  "mlp_layer_types": [
    "dense",
    "sparse",
    "sparse",
    "sparse"
  ],
  "model_type": "glm_moe_dsa",
  "moe_intermediate_size": 128,
  "n_group": 1,
  "n_routed_experts": 8,
  "n_shared_experts": 1,
  "norm_topk_prob": true,
  "num_attention_heads": 4,
  "num_experts_per_tok": 2,
  "num_hidden_layers": 4,
  "num_key_value_heads": 4,
  "pad_token_id": null,
  "q_lora_rank": 96,
  "qk_head_dim": 80,
  "qk_nope_head_dim": 48,
  "qk_rope_head_dim": 32,
  "rms_norm_eps": 1e-05,
  "rope_parameters": {
    "rope_theta": 10000.0,
    "rope_type": "default"
  },
  "routed_scaling_factor": 2.5,
  "tie_word_embeddings": false,
  "topk_group": 1,
  "transformers_version": "5.17.0",
  "use_cache": true,
  "v_head_dim": 64,
  "vocab_size": 512
}
)json"},
    // /work/shared/configs/deepseek-v3.json (deepseek-ai DeepSeek-V3 config.json)
    {"deepseek-v3", R"json({
  "architectures": [
    "DeepseekV3ForCausalLM"
  ],
  "model_type": "deepseek_v3",
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 0,
  "eos_token_id": 1,
  "first_k_dense_replace": 3,
  "hidden_act": "silu",
  "hidden_size": 7168,
  "initializer_range": 0.02,
  "intermediate_size": 18432,
  "kv_lora_rank": 512,
  "max_position_embeddings": 163840,
  "moe_intermediate_size": 2048,
  "moe_layer_freq": 1,
  "n_group": 8,
  "n_routed_experts": 256,
  "n_shared_experts": 1,
  "norm_topk_prob": true,
  "num_attention_heads": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 61,
  "num_key_value_heads": 128,
  "num_nextn_predict_layers": 1,
  "q_lora_rank": 1536,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "rms_norm_eps": 1e-06,
  "rope_scaling": {
    "beta_fast": 32,
    "beta_slow": 1,
    "factor": 40,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "original_max_position_embeddings": 4096,
    "type": "yarn"
  },
  "rope_theta": 10000,
  "routed_scaling_factor": 2.5,
  "scoring_func": "sigmoid",
  "tie_word_embeddings": false,
  "topk_group": 4,
  "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16",
  "use_cache": true,
  "v_head_dim": 128,
  "vocab_size": 129280
})json"},
    // DeepSeek-V3.2-Exp (deepseek-ai/DeepSeek-V3.2-Exp config.json, quantization_config dropped): the
    // DeepSeek-V3 dimensions plus the DSA lightning indexer (64 heads x 128, top-2048). No
    // indexer_rope_interleave key there: its indexer rotates split halves (the model_type default,
    // src/model/config.cpp), its main attention interleaved pairs like DeepSeek-V3.
    {"deepseek-v32", R"json({
  "architectures": [
    "DeepseekV32ForCausalLM"
  ],
  "model_type": "deepseek_v32",
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 0,
  "eos_token_id": 1,
  "ep_size": 1,
  "first_k_dense_replace": 3,
  "hidden_act": "silu",
  "hidden_size": 7168,
  "index_head_dim": 128,
  "index_n_heads": 64,
  "index_topk": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 18432,
  "kv_lora_rank": 512,
  "max_position_embeddings": 163840,
  "moe_intermediate_size": 2048,
  "moe_layer_freq": 1,
  "n_group": 8,
  "n_routed_experts": 256,
  "n_shared_experts": 1,
  "norm_topk_prob": true,
  "num_attention_heads": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 61,
  "num_key_value_heads": 128,
  "num_nextn_predict_layers": 1,
  "q_lora_rank": 1536,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "rms_norm_eps": 1e-06,
  "rope_scaling": {
    "beta_fast": 32,
    "beta_slow": 1,
    "factor": 40,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "original_max_position_embeddings": 4096,
    "type": "yarn"
  },
  "rope_theta": 10000,
  "routed_scaling_factor": 2.5,
  "scoring_func": "sigmoid",
  "tie_word_embeddings": false,
  "topk_group": 4,
  "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16",
  "use_cache": true,
  "v_head_dim": 128,
  "vocab_size": 129280
})json"},
};

}  // namespace

const char* builtin_config_json(const std::string& name) {
  for (const Builtin& b : kBuiltins)
    if (name == b.name) return b.json;
  return nullptr;
}

std::string builtin_config_names() {
  std::string s;
  for (const Builtin& b : kBuiltins) {
    if (!s.empty()) s += ", ";
    s += b.name;
  }
  return s;
}

std::vector<std::string> builtin_config_list() {
  std::vector<std::string> v;
  for (const Builtin& b : kBuiltins) v.push_back(b.name);
  return v;
}

}  // namespace glm5
