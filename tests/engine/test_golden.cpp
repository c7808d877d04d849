// CPU reference engine vs HuggingFace transformers on the golden glm5-tiny checkpoint.
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/decode_engine.h"
#include "engine/greedy_decode.h"
#include "golden.h"
#include "model/config.h"
#include "model/weights.h"

using namespace glm5;

TEST(GoldenCpu, Bf16KvReproducesGreedyTokensAndLogits) {
  test::Golden g = test::load_golden();
  ModelConfig cfg = load_model_config(test::golden_dir() + "/config.json");
  WeightOptions wo;  // host, F32
  Weights w = load_weights(cfg, test::golden_dir(), wo);
  GreedyDecodeResult r = greedy_decode(cfg, w, Backend::Cpu, KvPath::Bf16, g.prompt, int(g.generated.size()));
  ASSERT_EQ(r.generated.size(), g.generated.size());
  double worst = 0;
  for (size_t k = 0; k < g.logits.size(); ++k) {
    double e = relative_error(r.logits[k], g.logits[k]);
    std::printf("step %zu: token %d (reference %d) logits relative error %.3g\n", k, r.generated[k], g.generated[k], e);
    worst = std::max(worst, e);
  }
  EXPECT_EQ(r.generated, g.generated);
  // Storing the latent in BF16 alone costs ~3.7e-3 at the first step: tools/golden_reference.py
  // (an independent numpy model of HF's forward, 1.3e-6 from the golden logits in fp32) gives
  // 3.66e-3 once its latent and rope KV are rounded to bf16, the same as this engine (3.66e-3).
  // Later steps drift further as rounded keys accumulate (up to ~4e-2 at step 6); greedy tokens
  // stay exact.
  EXPECT_LE(relative_error(r.logits[0], g.logits[0]), 5e-3);
  EXPECT_LE(worst, 6e-2);
}

TEST(GoldenCpu, Fp8KvPathsAgreeAndStayClose) {
  // FP8 KV changes the numbers a little: report the error with teacher forcing, check the three
  // FP8 paths compute the same attention (identical logits up to summation order).
  test::Golden g = test::load_golden();
  ModelConfig cfg = load_model_config(test::golden_dir() + "/config.json");
  Weights w = load_weights(cfg, test::golden_dir(), WeightOptions{});
  int n = int(g.generated.size());
  GreedyDecodeResult fp8 = greedy_decode(cfg, w, Backend::Cpu, KvPath::Fp8, g.prompt, n, g.generated);
  GreedyDecodeResult cast = greedy_decode(cfg, w, Backend::Cpu, KvPath::Cast, g.prompt, n, g.generated);
  GreedyDecodeResult gather = greedy_decode(cfg, w, Backend::Cpu, KvPath::GatherCast, g.prompt, n, g.generated);
  for (int k = 0; k < n; ++k) {
    double e = relative_error(fp8.logits[k], g.logits[k]);
    std::printf("fp8 KV step %d: logits relative error %.3g, top-1 %d (reference %d)\n", k, e,
                test::argmax(fp8.logits[k]), test::argmax(g.logits[k]));
    if (k == 0) {
      EXPECT_LT(e, 0.1) << "FP8 KV error unexpectedly large at the first step";
    }
    EXPECT_LT(relative_error(cast.logits[k], gather.logits[k]), 1e-5);
    EXPECT_LT(relative_error(fp8.logits[k], cast.logits[k]), 1e-2);
  }
}

TEST(GoldenCpu, HiddenStatesAtLastPromptPosition) {
  // Layer by layer against HF's hidden states: locates a divergence to the layer that causes it.
  test::Golden g = test::load_golden();
  ModelConfig cfg = load_model_config(test::golden_dir() + "/config.json");
  Weights w = load_weights(cfg, test::golden_dir(), WeightOptions{});
  EngineOptions opt;
  opt.kv_path = KvPath::Bf16;
  opt.max_seq_len = int(g.prompt.size()) + 1;
  OpTracer none;
  DecodeEngine e(cfg, w, opt, none);
  std::vector<std::vector<float>> hidden;
  for (size_t i = 0; i < g.prompt.size(); ++i) {
    if (i + 1 == g.prompt.size()) e.set_hidden_capture(&hidden);
    e.step({g.prompt[i]});
  }
  ASSERT_EQ(hidden.size(), size_t(cfg.num_hidden_layers) + 2);
  const int Hd = cfg.hidden_size;
  for (int r = 0; r < cfg.num_hidden_layers + 1; ++r) {
    // row r: embedding (r = 0), then layer r-1's output; the last HF row has the final norm applied
    const std::vector<float>& ours = (r == cfg.num_hidden_layers) ? hidden.back() : hidden[r];
    std::vector<float> ref(g.hidden_prefill_last.begin() + r * Hd, g.hidden_prefill_last.begin() + (r + 1) * Hd);
    double e_r = relative_error(ours, ref);
    std::printf("hidden row %d relative error %.3g\n", r, e_r);
    // BF16 latent KV: the numpy reference with the same rounding gives 3.3e-3 .. 4.3e-3 per row.
    EXPECT_LT(e_r, 6e-3) << "row " << r;
  }
}
