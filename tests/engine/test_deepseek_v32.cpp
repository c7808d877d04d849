// DeepSeek-V3.2 (`deepseek_v32`: DeepSeek-V3 MLA + YaRN + the DSA lightning indexer with split-half
// indexer RoPE) through the same engine, on a small config of that model type with synthetic weights.
// The indexer RoPE style flag (ModelConfig::indexer_rope_interleave) must reach the indexer: flipping
// it changes which rows the indexer keeps (so the logits move) when top-k < context, and changes
// nothing when top-k keeps every row (the flag touches only the indexer, not the main attention).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/greedy_decode.h"
#include "golden.h"
#include "model/config.h"
#include "model/weights.h"

using namespace glm5;

namespace {

// The golden glm5-tiny config turned into a deepseek_v32 one: YaRN RoPE, grouped routing, no
// indexer_rope_interleave key (the model_type default applies: split halves).
ModelConfig tiny_v32(int index_topk) {
  std::ifstream in(test::golden_dir() + "/config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["model_type"] = "deepseek_v32";
  j.erase("indexer_rope_interleave");
  j["index_topk"] = index_topk;
  j["n_group"] = 2;
  j["topk_group"] = 1;
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 40}, {"original_max_position_embeddings", 64},
                       {"beta_fast", 32}, {"beta_slow", 1}, {"mscale", 1.0}, {"mscale_all_dim", 1.0}};
  j.erase("rope_parameters");
  j["rope_theta"] = 10000.0;
  return parse_model_config(j, "deepseek-v32-tiny config");
}

std::vector<int32_t> prompt_of(int n, int vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 37 + 11) % vocab);
  return p;
}

}  // namespace

TEST(DeepseekV32Cpu, DecodesWithSplitHalfIndexerRope) {
  ModelConfig cfg = tiny_v32(16);
  ASSERT_EQ(cfg.model_type, ModelType::DeepseekV32);
  ASSERT_TRUE(cfg.has_indexer);
  EXPECT_FALSE(cfg.indexer_rope_interleave);
  EXPECT_TRUE(cfg.rope_interleave);
  Weights w = synthetic_weights(cfg, 7, WeightOptions{});
  const std::vector<int32_t> prompt = prompt_of(48, cfg.vocab_size);  // 48 > top-k 16: the indexer selects
  std::vector<GreedyDecodeResult> r;
  for (KvPath p : {KvPath::Cast, KvPath::GatherCast, KvPath::Fp8})
    r.push_back(greedy_decode(cfg, w, Backend::Cpu, p, prompt, 3));
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(r[0].logits[k].size(), size_t(cfg.vocab_size));
    for (float v : r[2].logits[k]) ASSERT_TRUE(std::isfinite(v));
    EXPECT_LT(relative_error(r[0].logits[k], r[1].logits[k]), 1e-6);
    EXPECT_LT(relative_error(r[0].logits[k], r[2].logits[k]), 1e-5);
  }
}

TEST(DeepseekV32Cpu, IndexerRopeStyleFlagIsHonoured) {
  const std::vector<int32_t> prompt = prompt_of(48, 512);
  auto decode = [&](int topk, bool interleave) {
    ModelConfig cfg = tiny_v32(topk);
    cfg.indexer_rope_interleave = interleave;
    Weights w = synthetic_weights(cfg, 7, WeightOptions{});  // same seed: same weights for both styles
    return greedy_decode(cfg, w, Backend::Cpu, KvPath::Fp8, prompt, 2);
  };
  // top-k 16 of 48+ rows: the rotated indexer q/k differ between the styles, so do the scores and the
  // rows kept, so do the logits.
  GreedyDecodeResult split = decode(16, false), inter = decode(16, true);
  for (int k = 0; k < 2; ++k) EXPECT_GT(relative_error(split.logits[k], inter.logits[k]), 1e-3) << "step " << k;
  // top-k 64 >= every context (<= 50 rows): every row is kept whatever the scores; the flag must not
  // reach anything else (the main attention RoPE stays interleaved).
  GreedyDecodeResult split_all = decode(64, false), inter_all = decode(64, true);
  for (int k = 0; k < 2; ++k) EXPECT_LT(relative_error(split_all.logits[k], inter_all.logits[k]), 1e-6) << "step " << k;
}
