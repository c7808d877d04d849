// CPU reference engine vs HuggingFace transformers on the golden glm5-tiny checkpoint.
#include <gtest/gtest.h>

#include <cstdio>

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
  EXPECT_LE(worst, 1e-3);
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
    EXPECT_LT(e, 0.1) << "FP8 KV error unexpectedly large at step " << k;
    EXPECT_LT(relative_error(cast.logits[k], gather.logits[k]), 1e-5);
    EXPECT_LT(relative_error(fp8.logits[k], cast.logits[k]), 1e-2);
  }
}
