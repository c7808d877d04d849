// ModelConfig: the dimensions of a GLM-5 / DeepSeek-V3 / DeepSeek-V3.2 model, one field per line,
// filled by one function from a HuggingFace config.json. Names follow config.json.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace glm5 {

enum class ModelType { GlmMoeDsa, DeepseekV3, DeepseekV32 };

struct ModelConfig {
  std::string name;                  // "glm5", "glm5-tiny", or the config.json path it came from
  ModelType model_type = ModelType::GlmMoeDsa;  // "glm_moe_dsa" | "deepseek_v3" | "deepseek_v32"
  int hidden_size = 0;               // model width (GLM-5: 6144)
  int num_hidden_layers = 0;         // decoder layers, MTP layers excluded (GLM-5: 78)
  int vocab_size = 0;                // embedding / lm_head rows (GLM-5: 154880)
  float rms_norm_eps = 1e-5f;        // layer RMSNorms (input, post-attention, final)
  float mla_norm_eps = 1e-6f;        // q_a_layernorm / kv_a_layernorm eps (HF reference default 1e-6)

  // MLA attention
  int num_attention_heads = 0;       // query heads (GLM-5: 64)
  int q_lora_rank = 0;               // q_a_proj output (GLM-5: 2048)
  int kv_lora_rank = 0;              // latent width (GLM-5: 512)
  int qk_nope_head_dim = 0;          // (GLM-5: 192)
  int qk_rope_head_dim = 0;          // (GLM-5: 64)
  int v_head_dim = 0;                // (GLM-5: 256)
  float rope_theta = 10000.f;        // rope_parameters.rope_theta (GLM-5: 1e6)
  bool rope_interleave = true;       // main-attention RoPE pairs (2i, 2i+1) instead of (i, i+d/2)
  // YaRN (DeepSeek-V3): softmax scale multiplied by mscale^2; rope frequencies interpolated.
  std::string rope_type = "default"; // "default" | "yarn"
  float rope_factor = 1.f;           // YaRN factor
  float rope_mscale_all_dim = 0.f;   // YaRN mscale_all_dim
  int rope_original_max_position = 0;  // YaRN original_max_position_embeddings
  float rope_beta_fast = 32.f, rope_beta_slow = 1.f;
  int max_position_embeddings = 0;

  // DSA lightning indexer (absent in deepseek_v3)
  bool has_indexer = false;
  int index_n_heads = 0;             // (GLM-5: 32, DeepSeek-V3.2: 64)
  int index_head_dim = 0;            // (128)
  int index_topk = 0;                // tokens kept per query (2048)
  bool indexer_rope_interleave = true;  // indexer RoPE pairs (GLM-5: interleaved; DeepSeek-V3.2: split-half)
  std::vector<bool> indexer_shared;  // per layer: true = reuse the previous layer's top-k ("shared")

  // MLP / MoE
  int intermediate_size = 0;         // dense SwiGLU width (GLM-5: 12288)
  int moe_intermediate_size = 0;     // expert SwiGLU width (GLM-5: 2048)
  int n_routed_experts = 0;          // (256)
  int n_shared_experts = 0;          // (1)
  int num_experts_per_tok = 0;       // top-k experts (8)
  int n_group = 1;                   // expert groups for group-limited routing
  int topk_group = 1;                // groups kept
  float routed_scaling_factor = 1.f; // (2.5)
  bool norm_topk_prob = true;
  std::vector<bool> layer_is_moe;    // per layer: MoE (true) or dense MLP (false)

  // Derived
  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // 1/sqrt(qk_head_dim), times mscale^2 under YaRN (DeepSeek-V3 reference).
  float softmax_scale() const;
  int num_moe_layers() const;
  // Parameter count (all layers, all experts; embedding and lm_head included).
  double parameter_count() const;
};

// Largest num_hidden_layers parse_model_config accepts (GLM-5: 78, DeepSeek-V3: 61).
inline constexpr int kMaxHiddenLayers = 4096;
// Size bounds parse_model_config enforces so that the memory plan's products and sums stay far inside 64 bits
// (config.cpp, check_model_size): elements of one stored tensor (GLM-5's largest, a layer's stacked experts:
// 256 x 2048 x 6144 = 3.2e9), parameters of the model (GLM-5: ~7.5e11), MoE layers x routed experts (GLM-5: 75 x 256).
inline constexpr int64_t kMaxTensorElements = int64_t(1) << 40;
inline constexpr int64_t kMaxModelParameters = int64_t(1) << 46;
inline constexpr int64_t kMaxExpertTensors = int64_t(1) << 20;

// Parses a HuggingFace config.json object. `source` names the file in error messages.
// Throws glm5::Error naming the key for: unknown model_type, a missing required key, a key of the
// wrong JSON type, or inconsistent dimensions (e.g. n_routed_experts % n_group != 0,
// kv_lora_rank % 16 != 0, list lengths that differ from num_hidden_layers).
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source);

// Reads and parses `path` (a config.json file, or a directory holding one).
ModelConfig load_model_config(const std::string& path);

// Built-in configs: "glm5" (the real GLM-5 dimensions), "glm5-tiny" (the golden checkpoint's config),
// "deepseek-v3", "deepseek-v32" (DeepSeek-V3.2-Exp: V3 dims + a 64-head DSA indexer with split-half
// indexer RoPE); '_' is read as '-' ("deepseek_v32" works). Throws glm5::Error listing the known names
// otherwise. A built-in name wins over a file of the same name in the working directory.
ModelConfig builtin_model_config(const std::string& name);

// `name_or_path`: a built-in name, or a path to a config.json / checkpoint directory.
ModelConfig resolve_model_config(const std::string& name_or_path);

// The files a `--model` value may be read from: the value itself (a config.json) and <value>/config.json (a
// checkpoint directory). Outputs must not land on either (require_outputs_not_inputs, trace/atomic_file.h).
std::vector<std::string> model_config_inputs(const std::string& name_or_path);

}  // namespace glm5
