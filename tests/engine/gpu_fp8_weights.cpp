// FP8 block-scaled weights through the whole engine: the golden glm5-tiny checkpoint quantized per
// 128x128 block on load (WeightOptions.fp8_linear) decodes on the GPU (FP8 GEMV / MoE kernels, fused
// gate_up scales, expert scales) as the CPU engine does with the same FP8 weights; the distance of both
// to HF's BF16-weight logits is printed (the cost of FP8 weights on this checkpoint, not a bound).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "common/buffer.h"
#include "engine/decode_engine.h"
#include "engine/greedy_decode.h"
#include "golden.h"
#include "model/config.h"
#include "model/weights.h"

using namespace glm5;

namespace {
// The golden checkpoint with its projections quantized to FP8 per 128x128 block on load (WeightOptions::fp8_linear);
// on the device the other matrices as BF16.
Weights fp8_weights(const ModelConfig& cfg, Where where) {
  WeightOptions wo;
  wo.where = where;
  if (where == Where::Device) wo.matrix_dtype = DType::BF16;
  wo.fp8_linear = true;
  return load_weights(cfg, test::golden_dir(), wo);
}
}  // namespace

TEST(Fp8WeightsGpu, MatchesCpuEngineWithSameWeights) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  test::Golden g = test::load_golden();
  ModelConfig cfg = load_model_config(test::golden_dir() + "/config.json");
  Weights wd = fp8_weights(cfg, Where::Device);
  Weights wh = fp8_weights(cfg, Where::Host);
  const int n = int(g.generated.size());
  for (KvPath path : {KvPath::Bf16, KvPath::Fp8}) {
    GreedyDecodeResult gpu = greedy_decode(cfg, wd, Backend::Cuda, path, g.prompt, n, g.generated);
    GreedyDecodeResult cpu = greedy_decode(cfg, wh, Backend::Cpu, path, g.prompt, n, g.generated);
    for (int k = 0; k < n; ++k) {
      const double vs_cpu = relative_error(gpu.logits[k], cpu.logits[k]);
      std::printf("fp8 weights, %s KV, step %d: GPU vs CPU engine %.3g; vs HF (bf16 weights): GPU %.3g CPU %.3g\n",
                  kv_path_name(path).c_str(), k, vs_cpu, relative_error(gpu.logits[k], g.logits[k]),
                  relative_error(cpu.logits[k], g.logits[k]));
      EXPECT_LE(vs_cpu, 2e-2) << "step " << k;  // the BF16-weight engine's GPU-vs-CPU bound (gpu_golden)
    }
  }
}

// EngineOptions::gemv_fold on the golden checkpoint with FP8 projections (batch 1, side stream, the FP8 GEMV):
// attn.norm and attn.q_a_norm folded into the qkv_a / q_up GEMVs (and attn.rope into q_up: bitwise, so it adds no
// difference) give the logits of the separate kernels (relative L2
// <= 1e-3 at every step of the prompt and the teacher-forced decode; a norm left out or applied twice moves them by
// O(1)), and not bitwise at every step (so the folded path ran). Why not 1e-5: the two forms differ by fp32 order
// (~1e-7 per projection output), and the KV cache's rounding (e4m3 steps of 2^-3, BF16 of 2^-8) turns the few
// latent values that sit at a rounding boundary into whole-step differences; measured on the H200 (S19b, FP8 KV):
// 0 at the first step (one cached token, q irrelevant), 4e-6 .. 2.4e-4 after. Fp8WeightsGpu.MatchesCpuEngineWithSameWeights above
// runs with the folded norms (the default) against the CPU engine's separate ones.
TEST(Fp8WeightsGpu, FoldedOpsMatchSeparateKernels) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  test::Golden g = test::load_golden();
  ModelConfig cfg = load_model_config(test::golden_dir() + "/config.json");
  Weights wd = fp8_weights(cfg, Where::Device);
  std::vector<int32_t> feed = g.prompt;
  feed.insert(feed.end(), g.generated.begin(), g.generated.end());
  for (KvPath path : {KvPath::Bf16, KvPath::Fp8}) {
    std::vector<std::vector<float>> logits[2];
    for (int folded : {1, 0}) {
      EngineOptions opt;
      opt.backend = Backend::Cuda;
      opt.kv_path = path;
      opt.batch = 1;
      opt.max_seq_len = int(feed.size()) + 1;
      opt.gemv_fold = folded == 1;
      OpTracer none;
      DecodeEngine e(cfg, wd, opt, none);
      for (int32_t t : feed) {
        std::vector<float> l;
        e.step({t}, &l);
        logits[folded].push_back(std::move(l));
      }
    }
    size_t bitwise_equal = 0;
    for (size_t k = 0; k < feed.size(); ++k) {
      const double d = relative_error(logits[1][k], logits[0][k]);
      bitwise_equal += std::memcmp(logits[1][k].data(), logits[0][k].data(), logits[0][k].size() * 4) == 0;
      std::printf("gemv_fold on vs off, %s KV, step %zu: relative error %.3g\n", kv_path_name(path).c_str(), k, d);
      EXPECT_LE(d, 1e-3) << kv_path_name(path) << " KV, step " << k;
    }
    EXPECT_LT(bitwise_equal, feed.size()) << "every step bitwise equal: the folded norms did not run";
  }
}
