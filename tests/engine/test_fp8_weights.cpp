// FP8 block-scaled weights on the CPU engine (golden glm5-tiny checkpoint quantized per 128x128 block
// on load): the engine's FP8 path (linear / MoE twins reading e4m3 codes and block scales, fused
// gate_up scales, per-expert scales) equals the same engine fed F32 weights that hold the dequantized
// values (code x scale) — so every scale is found at the right place — and the FP8 and cast KV paths
// agree bit for bit. The distance to HF's BF16-weight logits is printed: this random-init tiny model
// amplifies any perturbation (FP8 KV alone moves it 0.06-0.96, see gpu_golden), so it is no bound.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "common/buffer.h"
#include "engine/greedy_decode.h"
#include "golden.h"
#include "model/config.h"
#include "model/weights.h"

using namespace glm5;

namespace {
// A host F32 copy of `w` with every FP8 tensor replaced by its dequantized values.
Weights dequantized(const Weights& w) {
  Weights out;
  for (const auto& [name, t] : w.tensors()) {
    WeightTensor f;
    f.dtype = DType::F32;
    f.shape = t.shape;
    Buffer b(Where::Host, size_t(t.numel()) * 4, name);
    float* v = b.as<float>();
    if (t.dtype == DType::F8_E4M3) {
      const int64_t cols = t.shape.back(), rows = t.shape[t.shape.size() - 2];
      const int64_t rb = (rows + 127) / 128, cb = (cols + 127) / 128;
      const uint8_t* codes = static_cast<const uint8_t*>(t.data);
      for (int64_t i = 0; i < t.numel(); ++i) {
        const int64_t e = i / (rows * cols), r = (i / cols) % rows, c = i % cols;
        v[i] = e4m3_bits_to_float(codes[i]) * t.scale_inv[(e * rb + r / 128) * cb + c / 128];
      }
    } else {
      std::memcpy(v, t.data, b.bytes());
    }
    f.data = v;
    out.add(name, std::move(f), std::move(b));
  }
  return out;
}
}  // namespace

TEST(Fp8WeightsCpu, EqualsDequantizedWeightsAndPathsAgree) {
  test::Golden g = test::load_golden();
  ModelConfig cfg = load_model_config(test::golden_dir() + "/config.json");
  WeightOptions fo;
  fo.fp8_linear = true;
  Weights w = load_weights(cfg, test::golden_dir(), fo);
  Weights wf = dequantized(w);
  const int n = int(g.generated.size());
  GreedyDecodeResult fp8 = greedy_decode(cfg, w, Backend::Cpu, KvPath::Fp8, g.prompt, n, g.generated);
  GreedyDecodeResult cast = greedy_decode(cfg, w, Backend::Cpu, KvPath::Cast, g.prompt, n, g.generated);
  GreedyDecodeResult deq = greedy_decode(cfg, wf, Backend::Cpu, KvPath::Fp8, g.prompt, n, g.generated);
  for (int k = 0; k < n; ++k) {
    const double e = relative_error(fp8.logits[k], deq.logits[k]);
    std::printf("fp8 weights, CPU, step %d: vs dequantized F32 weights %.3g; vs HF (bf16 weights) %.3g\n", k, e,
                relative_error(fp8.logits[k], g.logits[k]));
    EXPECT_LE(e, 1e-4) << "step " << k;  // code x scale in double vs its fp32 product; near-tie top-k flips aside
    EXPECT_EQ(fp8.logits[k], cast.logits[k]) << "step " << k;
  }
}
