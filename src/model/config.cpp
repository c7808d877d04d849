// parse_model_config: HuggingFace config.json -> ModelConfig, in one function. Required keys are checked
// with their JSON type, optional keys take the defaults written next to them, and the invariants the
// engine relies on are validated here, each failure one line naming the file and the key.
#include "common/json_excerpt.h"
#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/input_file.h"
#include "model/builtin_configs.h"
#include "model/weights.h"

namespace glm5 {

namespace {

using nlohmann::json;

// Typed access to one JSON object with errors of the form
//   "config.json: key 'hidden_size' must be a positive integer, got \"abc\"".
class Reader {
 public:
  Reader(const json& j, const std::string& source, const std::string& prefix = "")
      : j_(j), source_(source), prefix_(prefix) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const json& at(const char* key) const { return j_.at(key); }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(source_ + ": key '" + prefix_ + key + "' " + what);
  }
  // Several keys together (their product is out of bounds): "keys a, b, c ...".
  [[noreturn]] void fail_keys(const std::string& keys, const std::string& what) const {
    throw Error(source_ + ": keys " + keys + " " + what);
  }
  [[noreturn]] void bad(const char* key, const std::string& expected) const {
    fail(key, "must be " + expected + ", got " + json_excerpt(j_.at(key)));
  }
  void require_key(const char* key, const std::string& expected) const {
    if (!has(key)) fail(key, "is missing (expected " + expected + ")");
  }

  int positive_int(const char* key) const {
    require_key(key, "a positive integer");
    return positive_int_value(key);
  }
  int positive_int(const char* key, int def) const { return has(key) ? positive_int_value(key) : def; }
  int nonneg_int(const char* key) const {
    require_key(key, "a non-negative integer");
    return nonneg_int_value(key);
  }
  int nonneg_int(const char* key, int def) const { return has(key) ? nonneg_int_value(key) : def; }
  double positive_number(const char* key) const {
    require_key(key, "a positive number");
    return positive_number_value(key);
  }
  double positive_number(const char* key, double def) const {
    return has(key) ? positive_number_value(key) : def;
  }
  double number(const char* key, double def) const {
    if (!has(key)) return def;
    const json& v = at(key);
    if (!v.is_number()) bad(key, "a number");
    return v.get<double>();
  }
  bool boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    const json& v = at(key);
    if (!v.is_boolean()) bad(key, "true or false");
    return v.get<bool>();
  }
  std::string string(const char* key) const {
    require_key(key, "a string");
    const json& v = at(key);
    if (!v.is_string()) bad(key, "a string");
    return v.get<std::string>();
  }
  std::string string(const char* key, const std::string& def) const { return has(key) ? string(key) : def; }

 private:
  // Integers written as 3.0 are accepted (some exporters write floats); 3.5 or "3" are not.
  bool as_int(const json& v, long long* out) const {
    if (v.is_number_integer()) {
      *out = v.get<long long>();
      return true;
    }
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 2e9) {
        *out = (long long)d;
        return true;
      }
    }
    return false;
  }
  int positive_int_value(const char* key) const {
    long long v;
    if (!as_int(at(key), &v) || v <= 0 || v > 2000000000) bad(key, "a positive integer (at most 2000000000)");
    return int(v);
  }
  int nonneg_int_value(const char* key) const {
    long long v;
    if (!as_int(at(key), &v) || v < 0 || v > 2000000000) bad(key, "a non-negative integer (at most 2000000000)");
    return int(v);
  }
  double positive_number_value(const char* key) const {
    const json& v = at(key);
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>())) bad(key, "a positive number");
    return v.get<double>();
  }

  const json& j_;
  const std::string& source_;
  std::string prefix_;
};

// Per-layer string list (mlp_layer_types, indexer_types): an array of num_hidden_layers strings, each
// one of `a` / `b`; returns true where the entry is `b`.
std::vector<bool> layer_list(const Reader& r, const char* key, int layers, const char* a, const char* b) {
  const json& v = r.at(key);
  const std::string expected = std::string("an array of ") + std::to_string(layers) + " strings \"" + a +
                               "\" or \"" + b + "\" (one per layer)";
  if (!v.is_array()) r.bad(key, expected);
  if (int(v.size()) != layers)
    r.fail(key, "has " + std::to_string(v.size()) + " entries but num_hidden_layers is " + std::to_string(layers));
  std::vector<bool> out(layers);
  for (int i = 0; i < layers; ++i) {
    const json& e = v[i];
    if (e.is_string() && e.get<std::string>() == a) out[i] = false;
    else if (e.is_string() && e.get<std::string>() == b) out[i] = true;
    else r.fail(std::string(key) + "[" + std::to_string(i) + "]", std::string("must be \"") + a + "\" or \"" + b +
                                                                    "\", got " + json_excerpt(e));
  }
  return out;
}

// RoPE parameters, either transformers-5 style `rope_parameters` {rope_theta, rope_type, factor, ...}
// or legacy `rope_theta` + `rope_scaling` {type | rope_type, factor, mscale_all_dim, ...}.
void parse_rope(const Reader& r, const json& j, const std::string& source, ModelConfig& c) {
  c.rope_theta = float(r.positive_number("rope_theta", 10000.0));  // HF default
  const char* scaling_key = nullptr;
  if (r.has("rope_parameters")) scaling_key = "rope_parameters";
  else if (r.has("rope_scaling")) scaling_key = "rope_scaling";
  if (!scaling_key) return;
  const json& rp = j.at(scaling_key);
  if (!rp.is_object()) r.bad(scaling_key, "an object");
  Reader s(rp, source, std::string(scaling_key) + ".");
  if (s.has("rope_theta")) c.rope_theta = float(s.positive_number("rope_theta"));
  std::string type = "default";
  if (s.has("rope_type")) type = s.string("rope_type");
  else if (s.has("type")) type = s.string("type");
  if (type != "default" && type != "yarn")
    s.fail(s.has("rope_type") ? "rope_type" : "type",
           "must be \"default\" or \"yarn\" (the RoPE kinds GLM-5 / DeepSeek use), got \"" + type + "\"");
  c.rope_type = type;
  if (type == "yarn") {
    c.rope_factor = float(s.positive_number("factor"));
    if (c.rope_factor < 1.f) s.fail("factor", "must be >= 1 for YaRN, got " + json_excerpt(rp.at("factor")));
    c.rope_mscale_all_dim = float(s.number("mscale_all_dim", 0.0));
    if (c.rope_mscale_all_dim < 0) s.fail("mscale_all_dim", "must be >= 0, got " + json_excerpt(rp.at("mscale_all_dim")));
    c.rope_original_max_position = s.positive_int("original_max_position_embeddings", c.max_position_embeddings);
    c.rope_beta_fast = float(s.positive_number("beta_fast", 32.0));
    c.rope_beta_slow = float(s.positive_number("beta_slow", 1.0));
  }
}

}  // namespace

namespace {

// Sizes no model has, refused before any product of them is formed: each key alone may be up to 2e9, but the memory
// plan multiplies and sums them (session 33's bad-input run: a config with n_shared_experts = 2e9 printed a wrapped
// scratch size, and index_n_heads x index_head_dim x q_lora_rank wrapped a tensor's byte count past 2^64, so the fit
// check passed and an allocation of a wrapped size was tried). Bounds, far above GLM-5 / DeepSeek-V3 (largest stored
// tensor ~4e9 elements, ~7e11 parameters, 256 experts x 75 MoE layers): every stored tensor at most kMaxTensorElements,
// the model at most kMaxModelParameters, and MoE layers x routed experts at most kMaxExpertTensors (the checkpoint
// reader lists three tensor names per expert and layer). The error names the key, the tensor and its shape.
// The config keys whose product is the shape of stored tensor `name` (attention_specs / mlp_specs, tensor_specs.cpp).
std::string size_keys(const std::string& name) {
  auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (has("embed_tokens") || has("lm_head")) return "vocab_size, hidden_size";
  if (has("indexer.wq_b")) return "index_n_heads, index_head_dim, q_lora_rank";
  if (has("indexer.wk")) return "index_head_dim, hidden_size";
  if (has("indexer.weights_proj")) return "index_n_heads, hidden_size";
  if (has("q_a_proj")) return "q_lora_rank, hidden_size";
  if (has("q_b_proj")) return "num_attention_heads, qk_nope_head_dim, qk_rope_head_dim, q_lora_rank";
  if (has("kv_a_proj")) return "kv_lora_rank, qk_rope_head_dim, hidden_size";
  if (has("kv_b_proj")) return "num_attention_heads, qk_nope_head_dim, v_head_dim, kv_lora_rank";
  if (has("o_proj")) return "num_attention_heads, v_head_dim, hidden_size";
  if (has("shared_experts")) return "n_shared_experts, moe_intermediate_size, hidden_size";
  if (has("experts")) return "n_routed_experts, moe_intermediate_size, hidden_size";
  if (has("mlp.gate.")) return "n_routed_experts, hidden_size";
  return "intermediate_size, hidden_size";
}

// Elements of a tensor of `shape`, refusing a dimension outside 1..2^31-1 (the kernels and the engine index rows and
// columns with 32-bit ints, and form qk_head_dim() in one) or more than kMaxTensorElements in all.
long double checked_elements(const Reader& r, const std::string& name, const std::vector<int64_t>& shape) {
  long double n = 1;
  for (int64_t d : shape) {
    if (d <= 0 || d > std::numeric_limits<int32_t>::max())
      r.fail_keys(size_keys(name), "give tensor " + name + " a dimension of " + std::to_string(d) +
                                       ", expected 1 to 2147483647");
    n *= static_cast<long double>(d);
  }
  if (n > static_cast<long double>(kMaxTensorElements)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3Le", n);
    r.fail_keys(size_keys(name), "give tensor " + name + " the shape " + shape_str(shape) + " = " + buf + " elements, more than " +
                                     std::to_string(kMaxTensorElements) + " (no real model has a tensor that large)");
  }
  return n;
}

void check_model_size(const Reader& r, const ModelConfig& c) {
  const int64_t moe_layers = std::max(1, c.num_moe_layers());
  if (moe_layers * c.n_routed_experts > kMaxExpertTensors)
    r.fail("n_routed_experts", "is " + std::to_string(c.n_routed_experts) + ": with " +
                                   std::to_string(c.num_moe_layers()) + " MoE layers that is more than " +
                                   std::to_string(kMaxExpertTensors) + " experts in all (no real model has that many)");
  long double total = 0;
  for (const TensorSpec& t : stored_tensor_specs(c)) total += checked_elements(r, t.name, t.shape);
  // The MoE keys bound as if there were a MoE layer even where every layer is dense: the engine sizes its MoE scratch
  // and the fused shared-expert copy from them regardless (session 33's review: an all-dense config with
  // n_shared_experts = moe_intermediate_size = 2e9 still wrapped the scratch plan).
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size, E = c.n_routed_experts;
  checked_elements(r, "model.layers.N.mlp.shared_experts.gate_proj.weight",
                   {int64_t(std::max(1, c.n_shared_experts)) * I, H});
  checked_elements(r, "model.layers.N.mlp.experts.gate_proj.weight", {E, I, H});
  if (total > static_cast<long double>(kMaxModelParameters)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3Le", total);
    r.fail_keys("hidden_size, num_hidden_layers and the others", std::string("give ") + buf + " parameters, more than " +
                              std::to_string(kMaxModelParameters) + " (no real model has that many)");
  }
}

}  // namespace

ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw Error(source + ": must be a JSON object, got " + json_excerpt(j));
  Reader r(j, source);
  ModelConfig c;
  c.name = source;

  const std::string mt = r.string("model_type");
  if (mt == "glm_moe_dsa") c.model_type = ModelType::GlmMoeDsa;
  else if (mt == "deepseek_v3") c.model_type = ModelType::DeepseekV3;
  else if (mt == "deepseek_v32") c.model_type = ModelType::DeepseekV32;
  else
    r.fail("model_type", "must be \"glm_moe_dsa\", \"deepseek_v3\" or \"deepseek_v32\", got \"" + mt + "\"");

  c.hidden_size = r.positive_int("hidden_size");
  c.num_hidden_layers = r.positive_int("num_hidden_layers");  // MTP layers (num_nextn_predict_layers) excluded
  // Bounded before the per-layer lists are built (a fuzzed 7e8 took 72 s here, 2026-11-29 fuzz run).
  if (c.num_hidden_layers > kMaxHiddenLayers)
    r.fail("num_hidden_layers", "is " + std::to_string(c.num_hidden_layers) + ", more than " +
                                    std::to_string(kMaxHiddenLayers) + " (no real model has that many layers)");
  c.vocab_size = r.positive_int("vocab_size");
  c.rms_norm_eps = float(r.positive_number("rms_norm_eps"));
  c.mla_norm_eps = 1e-6f;  // no config key: the HF reference constructs q_a/kv_a RMSNorms with eps 1e-6
  c.max_position_embeddings = r.positive_int("max_position_embeddings");

  // MLA attention
  c.num_attention_heads = r.positive_int("num_attention_heads");
  c.q_lora_rank = r.positive_int("q_lora_rank");
  c.kv_lora_rank = r.positive_int("kv_lora_rank");
  c.qk_nope_head_dim = r.positive_int("qk_nope_head_dim");
  c.qk_rope_head_dim = r.positive_int("qk_rope_head_dim");
  c.v_head_dim = r.positive_int("v_head_dim");
  parse_rope(r, j, source, c);
  // RoPE pairs (2i, 2i+1) by default: the golden checkpoint (transformers 5.17 GlmMoeDsa, no
  // rope_interleave key) is reproduced only with interleaved RoPE in both the main attention and the
  // indexer (tools/golden_reference.py tries all four combinations: only this one matches, 1e-6);
  // the HF DeepSeek-V3 code defaults to interleaved pairs too.
  c.rope_interleave = r.boolean("rope_interleave", true);

  // DSA lightning indexer
  c.has_indexer = c.model_type != ModelType::DeepseekV3;
  if (c.has_indexer) {
    c.index_n_heads = r.positive_int("index_n_heads");
    c.index_head_dim = r.positive_int("index_head_dim");
    c.index_topk = r.positive_int("index_topk");
    // DeepSeek-V3.2's indexer rotates split halves (DESIGN.md); GLM-5's interleaved pairs (golden).
    c.indexer_rope_interleave = r.boolean("indexer_rope_interleave", c.model_type == ModelType::GlmMoeDsa);
    if (r.has("indexer_types")) {
      c.indexer_shared = layer_list(r, "indexer_types", c.num_hidden_layers, "full", "shared");
      if (c.indexer_shared[0])
        r.fail("indexer_types[0]", "must be \"full\": the first layer has no previous top-k to share");
    } else {
      c.indexer_shared.assign(c.num_hidden_layers, false);
    }
  }

  // MLP / MoE
  c.intermediate_size = r.positive_int("intermediate_size");
  c.moe_intermediate_size = r.positive_int("moe_intermediate_size");
  c.n_routed_experts = r.positive_int("n_routed_experts");
  c.n_shared_experts = r.nonneg_int("n_shared_experts", 0);
  c.num_experts_per_tok = r.positive_int("num_experts_per_tok");
  c.n_group = r.positive_int("n_group", 1);
  c.topk_group = r.positive_int("topk_group", 1);
  c.routed_scaling_factor = float(r.positive_number("routed_scaling_factor", 1.0));
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  // Checked even when mlp_layer_types overrides it: a value past the last layer is a corrupt config.
  const int first_dense = r.nonneg_int("first_k_dense_replace", 0);
  if (first_dense > c.num_hidden_layers)
    r.fail("first_k_dense_replace", "is " + std::to_string(first_dense) + ", more than num_hidden_layers (" +
                                         std::to_string(c.num_hidden_layers) + ")");
  if (r.has("mlp_layer_types")) {
    c.layer_is_moe = layer_list(r, "mlp_layer_types", c.num_hidden_layers, "dense", "sparse");
  } else {
    // HF DeepSeek-V3: layer i is MoE iff i >= first_k_dense_replace and i % moe_layer_freq == 0.
    const int freq = r.positive_int("moe_layer_freq", 1);
    c.layer_is_moe.resize(c.num_hidden_layers);
    for (int i = 0; i < c.num_hidden_layers; ++i) c.layer_is_moe[i] = i >= first_dense && i % freq == 0;
  }

  if (c.num_moe_layers() > 0 && c.n_shared_experts < 1)
    r.fail("n_shared_experts", "must be at least 1 for a model with MoE layers (the engine runs one shared expert "
                               "beside the routed ones), got " + std::to_string(c.n_shared_experts));
  // Attention kind per layer (transformers 5 `layer_types`): the engine runs DSA (MLA + lightning
  // indexer) in every layer of glm_moe_dsa / deepseek_v32 and plain MLA in deepseek_v3.
  if (r.has("layer_types")) {
    const std::string kind = c.has_indexer ? "deepseek_sparse_attention" : "full_attention";
    const json& v = r.at("layer_types");
    if (!v.is_array()) r.bad("layer_types", "an array of " + std::to_string(c.num_hidden_layers) + " strings \"" + kind + "\"");
    if (int(v.size()) != c.num_hidden_layers)
      r.fail("layer_types", "has " + std::to_string(v.size()) + " entries but num_hidden_layers is " +
                                std::to_string(c.num_hidden_layers));
    for (size_t i = 0; i < v.size(); ++i)
      if (!v[i].is_string() || v[i].get<std::string>() != kind)
        r.fail("layer_types[" + std::to_string(i) + "]", "must be \"" + kind + "\" (the attention " + mt +
                                                             " layers run), got " + json_excerpt(v[i]));
  }

  // Features the engine does not implement: refuse rather than compute something else.
  if (r.string("scoring_func", "sigmoid") != "sigmoid")
    r.fail("scoring_func", "must be \"sigmoid\" (the GLM-5 / DeepSeek-V3 router), got " + json_excerpt(j.at("scoring_func")));
  if (r.string("hidden_act", "silu") != "silu")
    r.fail("hidden_act", "must be \"silu\" (SwiGLU MLPs), got " + json_excerpt(j.at("hidden_act")));
  if (r.boolean("tie_word_embeddings", false))
    r.fail("tie_word_embeddings", "must be false: a separate lm_head.weight is expected");
  if (r.boolean("attention_bias", false))
    r.fail("attention_bias", "must be false: MLA projections without bias are expected");

  // Invariants.
  if (r.has("qk_head_dim")) {
    int qk = r.positive_int("qk_head_dim");
    const int64_t sum = int64_t(c.qk_nope_head_dim) + c.qk_rope_head_dim;  // in 64 bits: each may be up to 2e9
    if (qk != sum)
      r.fail("qk_head_dim", "is " + std::to_string(qk) + " but qk_nope_head_dim + qk_rope_head_dim = " +
                                std::to_string(c.qk_nope_head_dim) + " + " + std::to_string(c.qk_rope_head_dim) +
                                " = " + std::to_string(sum));
  }
  if (c.qk_rope_head_dim % 2 != 0)
    r.fail("qk_rope_head_dim", "must be even (RoPE rotates pairs), got " + std::to_string(c.qk_rope_head_dim));
  if (c.kv_lora_rank % 16 != 0)
    r.fail("kv_lora_rank", "must be a multiple of 16 (latent KV cache rows), got " + std::to_string(c.kv_lora_rank));
  if (c.hidden_size % 16 != 0)
    r.fail("hidden_size", "must be a multiple of 16 (kernels need 16-byte rows), got " + std::to_string(c.hidden_size));
  if (c.has_indexer && c.index_head_dim % 4 != 0)
    r.fail("index_head_dim", "must be a positive multiple of 4 (the indexer cache packs 4-element groups), got " +
                                 std::to_string(c.index_head_dim));
  if (c.has_indexer && c.index_topk > c.max_position_embeddings)
    r.fail("index_topk", "is " + std::to_string(c.index_topk) + ", more than max_position_embeddings (" +
                             std::to_string(c.max_position_embeddings) + ")");
  if (c.has_indexer && c.index_head_dim < c.qk_rope_head_dim)
    r.fail("index_head_dim", "must be at least qk_rope_head_dim (" + std::to_string(c.qk_rope_head_dim) +
                                 ": the indexer ropes its first rope dims), got " + std::to_string(c.index_head_dim));
  if (c.n_routed_experts % c.n_group != 0)
    r.fail("n_group", "must divide n_routed_experts (" + std::to_string(c.n_routed_experts) + "), got " +
                          std::to_string(c.n_group));
  // A group's score is the sum of its two best experts (DeepSeek-V3's noaux_tc routing), so a group holds >= 2.
  else if (c.n_group > 1 && c.n_routed_experts / c.n_group < 2)
    r.fail("n_group", "must leave at least 2 experts per group (n_routed_experts = " + std::to_string(c.n_routed_experts) +
                          "), got " + std::to_string(c.n_group));
  if (c.topk_group > c.n_group)
    r.fail("topk_group", "must be at most n_group (" + std::to_string(c.n_group) + "), got " +
                             std::to_string(c.topk_group));
  const int selectable = c.n_routed_experts / c.n_group * c.topk_group;
  if (c.num_experts_per_tok > selectable)
    r.fail("num_experts_per_tok", "is " + std::to_string(c.num_experts_per_tok) + " but only " +
                                      std::to_string(selectable) +
                                      " experts are selectable (n_routed_experts / n_group * topk_group)");
  check_model_size(r, c);
  return c;
}

ModelConfig load_model_config(const std::string& path) {
  namespace fs = std::filesystem;
  std::string file = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) file = (fs::path(path) / "config.json").string();
  if (fs::is_directory(file, ec)) throw Error(file + ": is a directory, expected the model config (config.json)");
  if (fs::exists(file, ec)) require_regular_file(file, "the model config (config.json)");
  std::ifstream in(file);
  if (!in) throw Error(file + ": cannot open model config (config.json) for reading");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(file + ": not valid JSON (" + json_error_text(e) + ")");
  }
  return parse_model_config(j, file);
}

namespace {
// The built-in name for `name`: itself, or with '_' read as '-' so that the model_type spellings
// ("deepseek_v3", "deepseek_v32") name the built-ins too. Empty when neither is built in.
std::string builtin_name(const std::string& name) {
  if (builtin_config_json(name)) return name;
  std::string dashed = name;
  for (char& ch : dashed)
    if (ch == '_') ch = '-';
  return builtin_config_json(dashed) ? dashed : std::string();
}
}  // namespace

ModelConfig builtin_model_config(const std::string& name) {
  const std::string known = builtin_name(name);
  if (known.empty()) throw Error("unknown built-in model '" + name + "' (known: " + builtin_config_names() + ")");
  ModelConfig c = parse_model_config(nlohmann::json::parse(builtin_config_json(known)), "built-in config '" + known + "'");
  c.name = known;
  return c;
}

std::vector<std::string> model_config_inputs(const std::string& name_or_path) {
  return {name_or_path, (std::filesystem::path(name_or_path) / "config.json").string()};
}

ModelConfig resolve_model_config(const std::string& name_or_path) {
  if (!builtin_name(name_or_path).empty()) return builtin_model_config(name_or_path);
  std::error_code ec;
  if (!std::filesystem::exists(name_or_path, ec))
    throw Error("model '" + name_or_path + "' is neither a built-in (" + builtin_config_names() +
                ") nor an existing config.json / checkpoint directory");
  return load_model_config(name_or_path);
}

float ModelConfig::softmax_scale() const {
  // DeepSeek-V3 reference (modeling_deepseek.py / inference model.py): softmax_scale = qk_head_dim^-0.5,
  // and under YaRN with factor > 1: mscale = 0.1 * mscale_all_dim * ln(factor) + 1, scale *= mscale^2.
  double s = 1.0 / std::sqrt(double(qk_head_dim()));
  if (rope_type == "yarn" && rope_factor > 1.f && rope_mscale_all_dim > 0.f) {
    double m = 0.1 * double(rope_mscale_all_dim) * std::log(double(rope_factor)) + 1.0;
    s *= m * m;
  }
  return float(s);
}

int ModelConfig::num_moe_layers() const {
  int n = 0;
  for (bool b : layer_is_moe) n += b ? 1 : 0;
  return n;
}

double ModelConfig::parameter_count() const {
  double n = 0;
  for (const TensorSpec& t : expected_tensors(*this)) {
    double e = 1;
    for (int64_t d : t.shape) e *= double(d);
    n += e;
  }
  return n;
}

}  // namespace glm5
