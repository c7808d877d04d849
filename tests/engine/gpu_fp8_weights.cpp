// FP8 block-scaled weights through the whole engine: the golden glm5-tiny checkpoint quantized per
// 128x128 block on load (WeightOptions.fp8_linear) decodes on the GPU (FP8 GEMV / MoE kernels, fused
// gate_up scales, expert scales) as the CPU engine does with the same FP8 weights; the distance of both
// to HF's BF16-weight logits is printed (the cost of FP8 weights on this checkpoint, not a bound).
#include <gtest/gtest.h>

#include <cstdio>

#include "common/buffer.h"
#include "engine/greedy_decode.h"
#include "golden.h"
#include "model/config.h"
#include "model/weights.h"

using namespace glm5;

TEST(Fp8WeightsGpu, MatchesCpuEngineWithSameWeights) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  test::Golden g = test::load_golden();
  ModelConfig cfg = load_model_config(test::golden_dir() + "/config.json");
  WeightOptions dev;
  dev.where = Where::Device;
  dev.matrix_dtype = DType::BF16;
  dev.fp8_linear = true;
  Weights wd = load_weights(cfg, test::golden_dir(), dev);
  WeightOptions host;
  host.fp8_linear = true;
  Weights wh = load_weights(cfg, test::golden_dir(), host);
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
