// The step byte floor (engine/step_floor.h) on GLM-5's dimensions, against hand-computed parts.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "engine/decode_engine.h"
#include "engine/step_floor.h"
#include "golden.h"
#include "model/config.h"
#include "model/weights.h"
#include "profiler/op_tracer.h"

using namespace glm5;

TEST(StepFloor, Glm5Batch1Context32k) {
  const ModelConfig c = builtin_model_config("glm5");
  StepFloorInput in;
  in.batch = 1;
  in.context = 32768;
  in.copy_gbps = 4000;
  const StepFloor f = step_floor(c, in);
  // One token picks exactly K distinct experts.
  EXPECT_NEAR(f.expected_experts_per_layer, c.num_experts_per_tok, 1e-9);
  const double H = c.hidden_size;
  const int moe = c.num_moe_layers(), dense = c.num_hidden_layers - moe;
  EXPECT_DOUBLE_EQ(f.routed_expert_bytes, 2.0 * moe * c.num_experts_per_tok * 3 * H * c.moe_intermediate_size);
  EXPECT_DOUBLE_EQ(f.dense_mlp_bytes, 2.0 * dense * 3 * H * c.intermediate_size);
  EXPECT_DOUBLE_EQ(f.shared_expert_bytes, 2.0 * moe * 3 * H * c.moe_intermediate_size * c.n_shared_experts);
  // KV: every layer with its own indexer scores all 32768 keys (132-byte FP8 rows) and attention
  // reads 2048 latent rows (656-byte FP8 rows).
  int own = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) own += !(l < int(c.indexer_shared.size()) && c.indexer_shared[l]);
  EXPECT_DOUBLE_EQ(f.kv_bytes, double(own) * 32768 * 132 + double(c.num_hidden_layers) * 2048 * 656);
  EXPECT_DOUBLE_EQ(f.embed_lm_head_bytes, 2.0 * H + 2.0 * c.vocab_size * H + 4.0 * H);
  const double sum = f.attention_weight_bytes + f.dense_mlp_bytes + f.router_bytes + f.shared_expert_bytes +
                     f.routed_expert_bytes + f.embed_lm_head_bytes + f.kv_bytes;
  EXPECT_DOUBLE_EQ(f.total_bytes, sum);
  EXPECT_NEAR(f.floor_us, f.total_bytes / 4000e3, 1e-9);
  // GLM-5 at batch 1 reads roughly 20 GB of BF16 weights a step (the ~40B active parameters).
  EXPECT_GT(f.total_bytes, 15e9);
  EXPECT_LT(f.total_bytes, 100e9);
  const nlohmann::json j = to_json(f, in);
  EXPECT_DOUBLE_EQ(j["floor_us"].get<double>(), f.floor_us);
  EXPECT_EQ(j["weights_dtype"], "bf16");
}

TEST(StepFloor, ExpertsGrowWithBatchTowardsAll) {
  const ModelConfig c = builtin_model_config("glm5");
  StepFloorInput in;
  in.context = 1000;
  double prev = 0;
  for (int b : {1, 8, 32, 128, 1024}) {
    in.batch = b;
    const StepFloor f = step_floor(c, in);
    const double E = c.n_routed_experts, K = c.num_experts_per_tok;
    EXPECT_NEAR(f.expected_experts_per_layer, E * (1 - std::pow(1 - K / E, b)), 1e-9);
    EXPECT_GT(f.expected_experts_per_layer, prev);
    EXPECT_LE(f.expected_experts_per_layer, E);
    prev = f.expected_experts_per_layer;
  }
  EXPECT_GT(prev, 0.99 * c.n_routed_experts);
}

TEST(StepFloor, BadInputsThrow) {
  const ModelConfig c = builtin_model_config("glm5");
  StepFloorInput in;
  in.batch = 0;
  EXPECT_THROW(step_floor(c, in), Error);
  in.batch = 1;
  in.tp = 3;  // 64 heads do not split 3 ways
  EXPECT_THROW(step_floor(c, in), Error);
  in.tp = 8;
  EXPECT_NO_THROW(step_floor(c, in));
  in.copy_gbps = 0;
  EXPECT_EQ(step_floor(c, in).floor_us, 0.0);
}

// The floor from the loaded tensors equals the config's count when every matrix has the same dtype
// (glm5-tiny, F32 host weights: 4 bytes per parameter), and FP8 weights lower it.
TEST(StepFloor, FromLoadedWeightsMatchesConfigAndCountsFp8) {
  const ModelConfig c = builtin_model_config("glm5-tiny");
  WeightOptions wo;
  wo.where = Where::Host;
  wo.matrix_dtype = DType::F32;
  const Weights w = synthetic_weights(c, 1, wo);
  StepFloorInput in;
  in.batch = 3;
  in.context = 200;
  in.copy_gbps = 1000;
  in.weight_bytes_per_element = 4;
  const StepFloor ref = step_floor(c, in);
  StepFloorInput in2 = in;
  const StepFloor got = step_floor(c, w, in2);
  EXPECT_EQ(in2.weights_dtype, "f32");
  EXPECT_NEAR(got.attention_weight_bytes, ref.attention_weight_bytes, 1e-9 * ref.attention_weight_bytes);
  EXPECT_NEAR(got.dense_mlp_bytes, ref.dense_mlp_bytes, 1e-9 * ref.dense_mlp_bytes + 1);
  EXPECT_NEAR(got.router_bytes, ref.router_bytes, 1e-9 * ref.router_bytes + 1);
  EXPECT_NEAR(got.shared_expert_bytes, ref.shared_expert_bytes, 1e-9 * ref.shared_expert_bytes + 1);
  EXPECT_NEAR(got.routed_expert_bytes, ref.routed_expert_bytes, 1e-9 * ref.routed_expert_bytes + 1);
  EXPECT_NEAR(got.embed_lm_head_bytes, ref.embed_lm_head_bytes, 1e-9 * ref.embed_lm_head_bytes);
  EXPECT_DOUBLE_EQ(got.kv_bytes, ref.kv_bytes);
  EXPECT_NEAR(got.floor_us, ref.floor_us, 1e-9 * ref.floor_us);

  WeightOptions w8 = wo;
  w8.matrix_dtype = DType::BF16;
  w8.fp8_linear = true;
  const Weights f8 = synthetic_weights(c, 1, w8);
  StepFloorInput in3 = in;
  const StepFloor q = step_floor(c, f8, in3);
  EXPECT_EQ(in3.weights_dtype, "fp8");
  // q_a (FP8) reads 1 byte per parameter + one fp32 scale per 128x128 block.
  const WeightTensor& qa = f8.get("model.layers.0.self_attn.q_a_proj.weight");
  ASSERT_EQ(qa.dtype, DType::F8_E4M3);
  EXPECT_EQ(qa.bytes(), size_t(qa.numel()) + size_t(qa.scale_numel()) * 4);
  EXPECT_LT(q.attention_weight_bytes, 0.5 * ref.attention_weight_bytes * 1.05);  // ~1 byte vs 4
  EXPECT_LT(q.total_bytes, ref.total_bytes);
  EXPECT_DOUBLE_EQ(q.kv_bytes, ref.kv_bytes);
}

// The engine's moe.experts op declares the expert bytes the floor counts (step_floor.h): each distinct expert
// the batch selects, read once, E (1 - (1 - K/E)^B) of them, plus the activations; not B*K slots (which
// overstated the bytes ~4x at GLM-5 batch 128 and showed slow kernels above the copy rate, session 9's S9c).
// glm5-tiny (8 experts, top-2) on the CPU engine at batch 4: 5.47 distinct experts against 8 slots.
TEST(StepFloor, MoeExpertsOpDeclaresDistinctExpertBytes) {
  struct Recorder : OpTracer {
    std::vector<OpDesc> ops;
    void begin_op(const OpDesc& op) override { ops.push_back(op); }
  };
  const ModelConfig cfg = load_model_config(test::golden_dir() + "/config.json");
  const Weights w = load_weights(cfg, test::golden_dir(), WeightOptions{});  // host, F32: 4 bytes per weight
  EngineOptions opt;
  opt.kv_path = KvPath::Bf16;
  opt.batch = 4;
  opt.max_seq_len = 4;
  Recorder rec;
  DecodeEngine e(cfg, w, opt, rec);
  e.step({1, 2, 3, 4});
  const double E = cfg.n_routed_experts, K = cfg.num_experts_per_tok, B = 4, H = cfg.hidden_size;
  const double distinct = E * (1.0 - std::pow(1.0 - K / E, B));
  const double want = distinct * 3.0 * H * cfg.moe_intermediate_size * 4 + B * H * 8;
  int n = 0;
  for (const OpDesc& op : rec.ops) {
    if (op.op != "moe.experts") continue;
    EXPECT_NEAR(op.bytes, want, 1e-9 * want) << "layer " << op.layer;
    ++n;
  }
  int moe_layers = 0;
  for (bool m : cfg.layer_is_moe) moe_layers += m;
  EXPECT_EQ(n, moe_layers);
  EXPECT_GT(n, 0);
  EXPECT_LT(want, B * K * 3.0 * H * cfg.moe_intermediate_size * 4);  // the slot count would be larger
}
