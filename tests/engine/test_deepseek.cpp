// The same engine serving DeepSeek-V3 (`deepseek_v3`: MLA without the DSA indexer, attention over
// every context token, YaRN RoPE, group-limited routing) on a small config of that model type with
// synthetic weights: the three FP8 KV paths compute the same attention and the decode is finite.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/greedy_decode.h"
#include "golden.h"
#include "model/config.h"
#include "model/weights.h"

using namespace glm5;

TEST(DeepseekV3Cpu, DenseAttentionPathsAgree) {
  std::ifstream in(test::golden_dir() + "/config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["model_type"] = "deepseek_v3";
  for (const char* k : {"index_head_dim", "index_n_heads", "index_topk", "indexer_types", "layer_types"}) j.erase(k);
  j["n_group"] = 2;
  j["topk_group"] = 1;
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 40}, {"original_max_position_embeddings", 64},
                       {"beta_fast", 32}, {"beta_slow", 1}, {"mscale", 1.0}, {"mscale_all_dim", 1.0}};
  j.erase("rope_parameters");
  j["rope_theta"] = 10000.0;
  ModelConfig cfg = parse_model_config(j, "deepseek-tiny config");
  ASSERT_FALSE(cfg.has_indexer);
  EXPECT_GT(cfg.softmax_scale(), 1.f / std::sqrt(float(cfg.qk_head_dim())));  // YaRN mscale^2 > 1
  Weights w = synthetic_weights(cfg, 5, WeightOptions{});
  std::vector<int32_t> prompt;
  for (int i = 0; i < 70; ++i) prompt.push_back((i * 37 + 11) % cfg.vocab_size);  // past the YaRN original length
  std::vector<GreedyDecodeResult> r;
  for (KvPath p : {KvPath::Cast, KvPath::GatherCast, KvPath::Fp8, KvPath::Bf16})
    r.push_back(greedy_decode(cfg, w, Backend::Cpu, p, prompt, 4));
  for (int k = 0; k < 4; ++k) {
    for (float v : r[2].logits[k]) ASSERT_TRUE(std::isfinite(v));
    EXPECT_LT(relative_error(r[0].logits[k], r[1].logits[k]), 1e-6);
    EXPECT_LT(relative_error(r[0].logits[k], r[2].logits[k]), 1e-5);
    EXPECT_LT(relative_error(r[2].logits[k], r[3].logits[k]), 0.2);  // FP8 vs BF16 KV
  }
}
