// Tensor / expert parallelism on the CPU backend: N ranks (threads) with host all-reduces must compute
// the one-rank logits on the golden checkpoint (heads, MLP columns and experts split N ways).
#include <gtest/gtest.h>

#include <cstdio>

#include "common/error.h"
#include "engine/comm.h"
#include "engine/greedy_decode.h"
#include "golden.h"
#include "model/config.h"
#include "model/weights.h"

using namespace glm5;

class TensorParallelCpu : public ::testing::TestWithParam<int> {};

TEST_P(TensorParallelCpu, SameLogitsAsOneRank) {
  const int tp = GetParam();
  test::Golden g = test::load_golden();
  ModelConfig cfg = load_model_config(test::golden_dir() + "/config.json");
  Weights w = load_weights(cfg, test::golden_dir(), WeightOptions{});
  const int n = int(g.generated.size());
  for (KvPath path : {KvPath::Bf16, KvPath::Fp8}) {
    GreedyDecodeResult one = greedy_decode(cfg, w, Backend::Cpu, path, g.prompt, n, g.generated);
    auto comms = make_host_communicators(tp);
    std::vector<Communicator*> c;
    for (auto& p : comms) c.push_back(p.get());
    std::vector<const Weights*> ws(tp, &w);
    GreedyDecodeResult many = greedy_decode_parallel(cfg, ws, Backend::Cpu, path, g.prompt, n, c, g.generated);
    for (int k = 0; k < n; ++k) {
      double e = relative_error(many.logits[k], one.logits[k]);
      std::printf("tp %d %s step %d: relative error vs one rank %.3g\n", tp, kv_path_name(path).c_str(), k, e);
      EXPECT_LT(e, 1e-4) << "step " << k;  // summation order; BF16 KV rounding near a tie reaches 2.6e-5
      EXPECT_EQ(many.generated[k], one.generated[k]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TensorParallelCpu, ::testing::Values(2, 4));

TEST(TensorParallelCpu, RejectsASplitThatDoesNotDivide) {
  ModelConfig cfg = load_model_config(test::golden_dir() + "/config.json");
  Weights w = load_weights(cfg, test::golden_dir(), WeightOptions{});
  auto comms = make_host_communicators(3);  // 4 heads over 3 ranks
  std::vector<Communicator*> c;
  for (auto& p : comms) c.push_back(p.get());
  std::vector<const Weights*> ws(3, &w);
  try {
    greedy_decode_parallel(cfg, ws, Backend::Cpu, KvPath::Bf16, {1, 2, 3}, 2, c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads"), std::string::npos) << e.what();
  }
}
