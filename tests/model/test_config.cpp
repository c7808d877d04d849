// ModelConfig: the golden, GLM-5 and DeepSeek-V3 configs parse to the right values; built-ins equal
// the shared files; every bad config gives one line naming the file and key.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/builtin_configs.h"
#include "model/config.h"
#include "tests/shared_dir.h"

namespace glm5 {
namespace {

const std::string kShared = glm5::test::shared_dir();

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(ModelConfig, GoldenTiny) {
  ModelConfig c = load_model_config(kShared + "/golden/glm5-tiny/config.json");
  EXPECT_EQ(c.model_type, ModelType::GlmMoeDsa);
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.mla_norm_eps, 1e-6f);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.q_lora_rank, 96);
  EXPECT_EQ(c.kv_lora_rank, 64);
  EXPECT_EQ(c.qk_nope_head_dim, 48);
  EXPECT_EQ(c.qk_rope_head_dim, 32);
  EXPECT_EQ(c.qk_head_dim(), 80);
  EXPECT_EQ(c.v_head_dim, 64);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.f);
  EXPECT_EQ(c.rope_type, "default");
  EXPECT_TRUE(c.rope_interleave);          // transformers 5.17 GlmMoeDsa: interleaved pairs (golden)
  EXPECT_TRUE(c.indexer_rope_interleave);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_TRUE(c.has_indexer);
  EXPECT_EQ(c.index_n_heads, 16);
  EXPECT_EQ(c.index_head_dim, 64);
  EXPECT_EQ(c.index_topk, 16);
  EXPECT_EQ(c.indexer_shared, std::vector<bool>(4, false));
  EXPECT_EQ(c.intermediate_size, 512);
  EXPECT_EQ(c.moe_intermediate_size, 128);
  EXPECT_EQ(c.n_routed_experts, 8);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.n_group, 1);
  EXPECT_EQ(c.topk_group, 1);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.5f);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.layer_is_moe, (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(c.num_moe_layers(), 3);
  EXPECT_FLOAT_EQ(c.softmax_scale(), 1.f / std::sqrt(80.f));
  // Directory form and built-in give the same values.
  ModelConfig d = load_model_config(kShared + "/golden/glm5-tiny");
  ModelConfig b = builtin_model_config("glm5-tiny");
  EXPECT_EQ(b.name, "glm5-tiny");
  EXPECT_EQ(d.layer_is_moe, b.layer_is_moe);
  EXPECT_EQ(d.parameter_count(), b.parameter_count());
}

TEST(ModelConfig, Glm5) {
  ModelConfig c = load_model_config(kShared + "/configs/glm5.json");
  EXPECT_EQ(c.hidden_size, 6144);
  EXPECT_EQ(c.num_hidden_layers, 78);
  EXPECT_EQ(c.vocab_size, 154880);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.q_lora_rank, 2048);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_nope_head_dim, 192);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.v_head_dim, 256);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_TRUE(c.rope_interleave);
  EXPECT_TRUE(c.indexer_rope_interleave);
  EXPECT_EQ(c.index_n_heads, 32);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 2048);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.num_moe_layers(), 75);
  EXPECT_FALSE(c.layer_is_moe[2]);
  EXPECT_TRUE(c.layer_is_moe[3]);
  EXPECT_FLOAT_EQ(c.softmax_scale(), 1.f / 16.f);
  // zai-org: 744B parameters (743.9B counted here: 78 layers, embedding and lm_head, no MTP layer).
  EXPECT_GT(c.parameter_count(), 700e9);
  EXPECT_LT(c.parameter_count(), 760e9);
}

TEST(ModelConfig, DeepseekV3Yarn) {
  ModelConfig c = load_model_config(kShared + "/configs/deepseek-v3.json");
  EXPECT_EQ(c.model_type, ModelType::DeepseekV3);
  EXPECT_FALSE(c.has_indexer);
  EXPECT_TRUE(c.indexer_shared.empty());
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_hidden_layers, 61);
  EXPECT_EQ(c.num_attention_heads, 128);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.qk_nope_head_dim, 128);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  EXPECT_TRUE(c.rope_interleave);  // HF DeepSeek-V3 default
  EXPECT_EQ(c.rope_type, "yarn");
  EXPECT_FLOAT_EQ(c.rope_factor, 40.f);
  EXPECT_FLOAT_EQ(c.rope_mscale_all_dim, 1.f);
  EXPECT_EQ(c.rope_original_max_position, 4096);
  EXPECT_FLOAT_EQ(c.rope_beta_fast, 32.f);
  EXPECT_FLOAT_EQ(c.rope_beta_slow, 1.f);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.f);
  EXPECT_EQ(c.num_moe_layers(), 58);
  const double m = 0.1 * std::log(40.0) + 1.0;
  EXPECT_FLOAT_EQ(c.softmax_scale(), float(std::pow(192.0, -0.5) * m * m));
}

TEST(ModelConfig, BuiltinsEqualSharedFiles) {
  EXPECT_EQ(nlohmann::json::parse(builtin_config_json("glm5")), read_json(kShared + "/configs/glm5.json"));
  EXPECT_EQ(nlohmann::json::parse(builtin_config_json("glm5-tiny")),
            read_json(kShared + "/golden/glm5-tiny/config.json"));
  EXPECT_EQ(nlohmann::json::parse(builtin_config_json("deepseek-v3")),
            read_json(kShared + "/configs/deepseek-v3.json"));
  EXPECT_EQ(resolve_model_config("glm5").name, "glm5");
  EXPECT_EQ(resolve_model_config(kShared + "/configs/glm5.json").hidden_size, 6144);
  EXPECT_EQ(builtin_model_config("deepseek-v3").num_hidden_layers, 61);
}

// DeepSeek-V3.2-Exp: the DeepSeek-V3 config.json plus the indexer keys, nothing else changed; the
// indexer ropes split halves, the main attention interleaved pairs (as DeepSeek-V3).
TEST(ModelConfig, BuiltinDeepseekV32) {
  nlohmann::json v3 = read_json(kShared + "/configs/deepseek-v3.json");
  nlohmann::json v32 = nlohmann::json::parse(builtin_config_json("deepseek-v32"));
  EXPECT_EQ(v32["model_type"], "deepseek_v32");
  EXPECT_EQ(v32["index_n_heads"], 64);
  EXPECT_EQ(v32["index_head_dim"], 128);
  EXPECT_EQ(v32["index_topk"], 2048);
  for (const char* k : {"index_n_heads", "index_head_dim", "index_topk", "ep_size"}) v32.erase(k);
  v32["model_type"] = "deepseek_v3";
  v32["architectures"] = v3["architectures"];
  EXPECT_EQ(v32, v3);

  for (const char* name : {"deepseek-v32", "deepseek_v32"}) {
    ModelConfig c = resolve_model_config(name);
    EXPECT_EQ(c.name, "deepseek-v32");
    EXPECT_EQ(c.model_type, ModelType::DeepseekV32);
    EXPECT_TRUE(c.has_indexer);
    EXPECT_EQ(c.index_n_heads, 64);
    EXPECT_EQ(c.index_head_dim, 128);
    EXPECT_EQ(c.index_topk, 2048);
    EXPECT_FALSE(c.indexer_rope_interleave);
    EXPECT_TRUE(c.rope_interleave);
    EXPECT_EQ(c.rope_type, "yarn");
    EXPECT_EQ(c.num_hidden_layers, 61);
    EXPECT_EQ(c.num_attention_heads, 128);
    EXPECT_EQ(c.indexer_shared, std::vector<bool>(61, false));
    EXPECT_EQ(c.softmax_scale(), builtin_model_config("deepseek-v3").softmax_scale());
  }
  EXPECT_EQ(resolve_model_config("deepseek_v3").name, "deepseek-v3");
  // A config.json with "indexer_rope_interleave": true overrides the deepseek_v32 default.
  nlohmann::json j = nlohmann::json::parse(builtin_config_json("deepseek-v32"));
  j["indexer_rope_interleave"] = true;
  EXPECT_TRUE(parse_model_config(j, "config.json").indexer_rope_interleave);
}

TEST(ModelConfig, RopeParametersYarnAndLegacyAgree) {
  nlohmann::json j = read_json(kShared + "/configs/deepseek-v3.json");
  nlohmann::json k = j;
  k.erase("rope_scaling");
  k.erase("rope_theta");
  k["rope_parameters"] = {{"rope_theta", 10000}, {"rope_type", "yarn"}, {"factor", 40}, {"mscale_all_dim", 1.0},
                          {"original_max_position_embeddings", 4096}, {"beta_fast", 32}, {"beta_slow", 1}};
  ModelConfig a = parse_model_config(j, "a.json"), b = parse_model_config(k, "b.json");
  EXPECT_EQ(a.softmax_scale(), b.softmax_scale());
  EXPECT_EQ(b.rope_type, "yarn");
  EXPECT_EQ(b.rope_original_max_position, 4096);
}

TEST(ModelConfig, LegacyMoeLayersAndSharedIndexer) {
  nlohmann::json j = read_json(kShared + "/golden/glm5-tiny/config.json");
  j.erase("mlp_layer_types");
  j["first_k_dense_replace"] = 2;
  j["indexer_types"] = {"full", "shared", "full", "shared"};
  ModelConfig c = parse_model_config(j, "config.json");
  EXPECT_EQ(c.layer_is_moe, (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(c.indexer_shared, (std::vector<bool>{false, true, false, true}));
  j["moe_layer_freq"] = 2;
  j["first_k_dense_replace"] = 1;
  EXPECT_EQ(parse_model_config(j, "config.json").layer_is_moe, (std::vector<bool>{false, false, true, false}));
  // deepseek_v32: indexer with split-half indexer RoPE by default, interleaved main RoPE.
  j["model_type"] = "deepseek_v32";
  ModelConfig v = parse_model_config(j, "config.json");
  EXPECT_TRUE(v.has_indexer);
  EXPECT_TRUE(v.rope_interleave);
  EXPECT_FALSE(v.indexer_rope_interleave);
}

// Applies `edit` to the golden config and expects parse_model_config to throw exactly `message`.
void expect_error(const std::function<void(nlohmann::json&)>& edit, const std::string& message) {
  nlohmann::json j = read_json(kShared + "/golden/glm5-tiny/config.json");
  edit(j);
  try {
    parse_model_config(j, "config.json");
    ADD_FAILURE() << "no error; expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(ModelConfigErrors, Catalogue) {
  using J = nlohmann::json;
  expect_error([](J& j) { j["model_type"] = "llama"; },
               "config.json: key 'model_type' must be \"glm_moe_dsa\", \"deepseek_v3\" or \"deepseek_v32\", got \"llama\"");
  expect_error([](J& j) { j.erase("model_type"); }, "config.json: key 'model_type' is missing (expected a string)");
  expect_error([](J& j) { j.erase("kv_lora_rank"); },
               "config.json: key 'kv_lora_rank' is missing (expected a positive integer)");
  expect_error([](J& j) { j["hidden_size"] = "abc"; },
               "config.json: key 'hidden_size' must be a positive integer (at most 2000000000), got \"abc\"");
  expect_error([](J& j) { j["hidden_size"] = 0; }, "config.json: key 'hidden_size' must be a positive integer (at most 2000000000), got 0");
  expect_error([](J& j) { j["num_attention_heads"] = 4.5; },
               "config.json: key 'num_attention_heads' must be a positive integer (at most 2000000000), got 4.5");
  expect_error([](J& j) { j["rms_norm_eps"] = "1e-5"; },
               "config.json: key 'rms_norm_eps' must be a positive number, got \"1e-5\"");
  expect_error([](J& j) { j["norm_topk_prob"] = 1; }, "config.json: key 'norm_topk_prob' must be true or false, got 1");
  expect_error([](J& j) { j["rope_parameters"]["rope_type"] = "linear"; },
               "config.json: key 'rope_parameters.rope_type' must be \"default\" or \"yarn\" (the RoPE kinds GLM-5 / "
               "DeepSeek use), got \"linear\"");
  expect_error([](J& j) { j["rope_parameters"] = {{"rope_type", "yarn"}}; },
               "config.json: key 'rope_parameters.factor' is missing (expected a positive number)");
  expect_error([](J& j) { j["n_routed_experts"] = 6; j["n_group"] = 4; },
               "config.json: key 'n_group' must divide n_routed_experts (6), got 4");
  // Session 31 (bad-input attack): this config passed validation and failed at run time in the router's own check.
  expect_error([](J& j) { j["n_group"] = 8; j["topk_group"] = 8; },
               "config.json: key 'n_group' must leave at least 2 experts per group (n_routed_experts = 8), got 8");
  expect_error([](J& j) { j["topk_group"] = 2; }, "config.json: key 'topk_group' must be at most n_group (1), got 2");
  expect_error([](J& j) { j["num_experts_per_tok"] = 9; },
               "config.json: key 'num_experts_per_tok' is 9 but only 8 experts are selectable (n_routed_experts / "
               "n_group * topk_group)");
  expect_error([](J& j) { j["qk_head_dim"] = 96; },
               "config.json: key 'qk_head_dim' is 96 but qk_nope_head_dim + qk_rope_head_dim = 48 + 32 = 80");
  expect_error([](J& j) { j["kv_lora_rank"] = 60; },
               "config.json: key 'kv_lora_rank' must be a multiple of 16 (latent KV cache rows), got 60");
  expect_error([](J& j) { j["qk_rope_head_dim"] = 31; j.erase("qk_head_dim"); },
               "config.json: key 'qk_rope_head_dim' must be even (RoPE rotates pairs), got 31");
  expect_error([](J& j) { j["mlp_layer_types"] = {"dense", "sparse"}; },
               "config.json: key 'mlp_layer_types' has 2 entries but num_hidden_layers is 4");
  expect_error([](J& j) { j["mlp_layer_types"][2] = "moe"; },
               "config.json: key 'mlp_layer_types[2]' must be \"dense\" or \"sparse\", got \"moe\"");
  expect_error([](J& j) { j["indexer_types"][0] = "shared"; },
               "config.json: key 'indexer_types[0]' must be \"full\": the first layer has no previous top-k to share");
  expect_error([](J& j) { j.erase("index_topk"); },
               "config.json: key 'index_topk' is missing (expected a positive integer)");
  expect_error([](J& j) { j["index_head_dim"] = 16; },
               "config.json: key 'index_head_dim' must be at least qk_rope_head_dim (32: the indexer ropes its first "
               "rope dims), got 16");
  expect_error([](J& j) { j["scoring_func"] = "softmax"; },
               "config.json: key 'scoring_func' must be \"sigmoid\" (the GLM-5 / DeepSeek-V3 router), got \"softmax\"");
  expect_error([](J& j) { j["tie_word_embeddings"] = true; },
               "config.json: key 'tie_word_embeddings' must be false: a separate lm_head.weight is expected");
}

// Found by the H200 fuzz run of 2026-11-29 (fuzz_model_config timeout): num_hidden_layers 7e8 built
// per-layer lists for 72 s; it is refused at once now.
TEST(ModelConfigErrors, AbsurdLayerCountIsRefusedQuickly) {
  nlohmann::json j = read_json(kShared + "/configs/glm5.json");
  j["num_hidden_layers"] = 700000000.0;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    parse_model_config(j, "config.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "config.json: key 'num_hidden_layers' is 700000000, more than 4096 (no real model "
                                     "has that many layers)");
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.5);
}

TEST(ModelConfigErrors, FilesAndNames) {
  try {
    builtin_model_config("glm6");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "unknown built-in model 'glm6' (known: glm5, glm5-tiny, deepseek-v3, deepseek-v32)");
  }
  EXPECT_THROW(resolve_model_config("/nonexistent/config.json"), Error);
  EXPECT_THROW(load_model_config("/nonexistent"), Error);
  const std::string bad = ::testing::TempDir() + "/glm5_bad_config.json";
  std::ofstream(bad) << "{\"model_type\": ";
  try {
    load_model_config(bad);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(bad + ": not valid JSON", 0), 0u) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace glm5
