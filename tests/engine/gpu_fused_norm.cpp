// EngineOptions::fuse_next_norm on the GPU: GLM-5's per-layer shapes with FP8 weights at batch 1 (the per-token MoE
// path with the shared expert and the residual add fused, where the combine also runs the next RMSNorm). The logits
// must be bit for bit those of the unfused engine (separate attn.norm / final_norm launches) at every step, eager and
// replayed from a CUDA graph, and the ops must show the fusion: no attn.norm after a MoE layer, no final_norm after
// the last one, every other norm still there.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "engine/decode_engine.h"
#include "model/builtin_configs.h"
#include "model/config.h"
#include "model/weights.h"
#include "profiler/op_tracer.h"

using namespace glm5;

namespace {

// Records "op@layer" of every op scope (eager steps only: a graph replay opens no op scopes).
class OpNames : public OpTracer {
 public:
  void begin_op(const OpDesc& op) override { ops.push_back(op.op + "@" + std::to_string(op.layer)); }
  std::vector<std::string> ops;
  size_t count(const std::string& name) const {
    size_t n = 0;
    for (const std::string& o : ops) n += o == name;
    return n;
  }
};

struct DecodeRun {
  std::vector<std::vector<float>> logits;
  std::vector<std::string> ops;  // of the first step
};

DecodeRun decode(const ModelConfig& cfg, const Weights& w, bool fuse, bool graph, int steps) {
  EngineOptions eo;
  eo.backend = Backend::Cuda;
  eo.kv_path = KvPath::Fp8;
  eo.batch = 1;
  eo.max_seq_len = 2100 + steps;
  eo.pool_tokens = 8192;
  eo.seed = 7;
  eo.precision = ActivationPrecision::Bf16;
  eo.graph = graph;
  eo.fuse_next_norm = fuse;
  OpNames names;
  DecodeEngine e(cfg, w, eo, names);
  e.pool().fill_context(2100, e.stream());  // more than top-k 2048 tokens: the indexer selects
  std::vector<int32_t> tokens{4242};
  DecodeRun r;
  for (int i = 0; i < steps; ++i) {
    std::vector<float> logits;
    tokens = e.step(tokens, &logits);
    r.logits.push_back(logits);
    if (i == 0) r.ops = names.ops;
  }
  return r;
}

}  // namespace

TEST(FusedNormGpu, SameLogitsBitForBitAndOneLaunchFewerPerMoeLayer) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  // GLM-5's shapes (hidden 6144, 256 experts of 2048, top-8, shared expert), one dense and three MoE layers.
  ModelConfig cfg = builtin_model_config("glm5");
  cfg.num_hidden_layers = 4;
  cfg.layer_is_moe = {false, true, true, true};
  cfg.indexer_shared.resize(4);
  cfg.name = "glm5-4-layers";
  WeightOptions wo;
  wo.where = Where::Device;
  wo.matrix_dtype = DType::BF16;
  wo.fp8_linear = true;
  wo.share_mlp_weights = true;
  const Weights w = synthetic_weights(cfg, 11, wo);
  const int steps = 3;
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "CUDA graph" : "eager");
    const DecodeRun off = decode(cfg, w, false, graph, steps);
    const DecodeRun on = decode(cfg, w, true, graph, steps);
    ASSERT_EQ(on.logits.size(), off.logits.size());
    for (int s = 0; s < steps; ++s) {
      ASSERT_EQ(on.logits[s].size(), size_t(cfg.vocab_size));
      ASSERT_EQ(off.logits[s].size(), on.logits[s].size());
      size_t differ = 0;
      for (size_t i = 0; i < on.logits[s].size(); ++i) differ += std::memcmp(&on.logits[s][i], &off.logits[s][i], 4) != 0;
      EXPECT_EQ(differ, 0u) << "step " << s;
    }
    // Unfused: one attn.norm per layer and a final_norm. Fused: attn.norm only in layers 0 and 1 (after the
    // embedding and after the dense layer), no final_norm (the last MoE layer ran it).
    OpNames off_names, on_names;
    off_names.ops = off.ops;
    on_names.ops = on.ops;
    for (int l = 0; l < cfg.num_hidden_layers; ++l)
      EXPECT_EQ(off_names.count("attn.norm@" + std::to_string(l)), 1u) << "layer " << l;
    EXPECT_EQ(off_names.count("final_norm@-1"), 1u);
    EXPECT_EQ(on_names.count("attn.norm@0"), 1u);
    EXPECT_EQ(on_names.count("attn.norm@1"), 1u);
    EXPECT_EQ(on_names.count("attn.norm@2"), 0u);
    EXPECT_EQ(on_names.count("attn.norm@3"), 0u);
    EXPECT_EQ(on_names.count("final_norm@-1"), 0u);
    EXPECT_EQ(on.ops.size() + 3, off.ops.size());
  }
}
