// CUDA engine vs HuggingFace transformers on the golden glm5-tiny checkpoint (teacher forcing), and
// the three FP8 KV paths on the GPU against each other and against the CPU reference engine.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "common/buffer.h"
#include "engine/greedy_decode.h"
#include "golden.h"
#include "model/config.h"
#include "model/weights.h"

using namespace glm5;

namespace {
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}
}  // namespace

TEST(GoldenGpu, Bf16KvTeacherForcedLogits) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  test::Golden g = test::load_golden();
  ModelConfig cfg = load_model_config(test::golden_dir() + "/config.json");
  WeightOptions wo;
  wo.where = Where::Device;
  wo.matrix_dtype = DType::BF16;
  Weights w = load_weights(cfg, test::golden_dir(), wo);
  int n = int(g.generated.size());
  // The other activation precisions, for the record (the assertions apply to the engine default).
  for (auto [prec, name] : {std::pair{ActivationPrecision::Bf16, "bf16 activations"}}) {
    GreedyDecodeResult o = greedy_decode(cfg, w, Backend::Cuda, KvPath::Bf16, g.prompt, n, g.generated, prec);
    for (int k = 0; k < n; ++k)
      std::printf("GPU bf16 KV, %s, step %d: relative error %.3g, top-1 %d (reference %d)\n", name, k,
                  relative_error(o.logits[k], g.logits[k]), test::argmax(o.logits[k]), test::argmax(g.logits[k]));
  }
  GreedyDecodeResult r = greedy_decode(cfg, w, Backend::Cuda, KvPath::Bf16, g.prompt, n, g.generated);
  Weights wh = load_weights(cfg, test::golden_dir(), WeightOptions{});
  GreedyDecodeResult cpu = greedy_decode(cfg, wh, Backend::Cpu, KvPath::Bf16, g.prompt, n, g.generated);
  for (int k = 0; k < n; ++k) {
    double e = relative_error(r.logits[k], g.logits[k]);
    // Storing the latent in BF16 costs up to 3.9e-2 against HF's fp32 KV at step 6 in ANY correct
    // engine: tools/golden_reference.py with only its latent KV rounded to bf16 gives
    // 0.0037 0.0046 0.0046 0.0056 0.025 0.02 0.039 0.004 over the 8 steps, as the CPU engine does.
    // So the GPU's own error is checked against the CPU engine with the same BF16 KV (<= 2e-2),
    // and against HF with the BF16-KV allowance (<= 5e-2).
    double vs_cpu = relative_error(r.logits[k], cpu.logits[k]);
    std::printf("GPU bf16 KV step %d: vs CPU engine %.3g\n", k, vs_cpu);
    EXPECT_LE(vs_cpu, 2e-2) << "step " << k;
    double abs_err = max_abs_diff(r.logits[k], g.logits[k]);
    float margin = test::top1_margin(g.logits[k]);
    int ours = test::argmax(r.logits[k]), ref = test::argmax(g.logits[k]);
    std::printf("GPU bf16 KV step %d: relative error %.3g, max abs %.3g, top-1 %d (reference %d, margin %.3f)\n", k, e,
                abs_err, ours, ref, margin);
    EXPECT_LE(e, 5e-2) << "step " << k;
    if (margin > 2 * abs_err) {
      EXPECT_EQ(ours, ref) << "step " << k;
    }
  }
}

TEST(GoldenGpu, Fp8PathsAgreeWithEachOtherAndWithTheCpuEngine) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  test::Golden g = test::load_golden();
  ModelConfig cfg = load_model_config(test::golden_dir() + "/config.json");
  WeightOptions wo;
  wo.where = Where::Device;
  wo.matrix_dtype = DType::BF16;
  Weights wd = load_weights(cfg, test::golden_dir(), wo);
  Weights wh = load_weights(cfg, test::golden_dir(), WeightOptions{});
  int n = int(g.generated.size());
  std::vector<GreedyDecodeResult> gpu;
  for (KvPath p : {KvPath::Cast, KvPath::GatherCast, KvPath::Fp8})
    gpu.push_back(greedy_decode(cfg, wd, Backend::Cuda, p, g.prompt, n, g.generated));
  GreedyDecodeResult cpu = greedy_decode(cfg, wh, Backend::Cpu, KvPath::Fp8, g.prompt, n, g.generated);
  for (int k = 0; k < n; ++k) {
    double cg = relative_error(gpu[0].logits[k], gpu[1].logits[k]);
    double cf = relative_error(gpu[0].logits[k], gpu[2].logits[k]);
    double vs_cpu = relative_error(gpu[2].logits[k], cpu.logits[k]);
    double vs_ref = relative_error(gpu[2].logits[k], g.logits[k]);
    std::printf("GPU fp8 KV step %d: cast~gather %.2g, cast~fp8 %.2g, fp8 GPU~CPU %.3g, fp8 vs HF %.3g, top-1 %d (ref %d)\n",
                k, cg, cf, vs_cpu, vs_ref, test::argmax(gpu[2].logits[k]), test::argmax(g.logits[k]));
    EXPECT_LE(cg, 1e-5) << "cast and gather-cast must compute the same attention";
    EXPECT_LE(cf, 1e-4) << "cast and fp8 must compute the same attention";
    // FP8 KV on this tiny model (64-d latent, 16-token top-k) moves the indexer's choice: a flipped
    // top-k row changes a step's logits by O(1) (the CPU engine itself is 0.87 from HF at step 4), so
    // GPU~CPU and GPU~HF are reported, not bounded; the three paths must agree.
    (void)vs_cpu;
  }
}
