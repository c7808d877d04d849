// Weights: expected tensor list vs the golden tensors.json, loading the golden checkpoint (values
// checked against bytes read independently of the safetensors reader), stacking, sharing, synthetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "common/rng.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/synthetic.h"
#include "model/weights.h"
#include "tests/shared_dir.h"

namespace glm5 {
namespace {

const std::string kGolden = glm5::test::golden_dir();

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Independent reader: raw header + element as float from BF16 bytes, no SafetensorsFile.
struct RawFile {
  std::vector<uint8_t> bytes;
  nlohmann::json header;
  size_t data_start = 0;
  explicit RawFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + n);
    data_start = 8 + n;
  }
  float bf16(const std::string& name, int64_t i) const {
    EXPECT_EQ(header[name]["dtype"], "BF16");
    size_t off = data_start + header[name]["data_offsets"][0].get<size_t>() + 2 * size_t(i);
    uint32_t u = uint32_t(bytes[off]) << 16 | uint32_t(bytes[off + 1]) << 24;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

float host_f32(const WeightTensor& t, int64_t i) {
  EXPECT_EQ(t.dtype, DType::F32);
  return static_cast<const float*>(t.data)[i];
}

TEST(ExpectedTensors, MatchGoldenTensorsJson) {
  ModelConfig cfg = load_model_config(kGolden + "/config.json");
  nlohmann::json want = read_json(kGolden + "/tensors.json");
  std::map<std::string, std::vector<int64_t>> got;
  for (const TensorSpec& s : expected_tensors(cfg)) {
    EXPECT_TRUE(got.emplace(s.name, s.shape).second) << "duplicate " << s.name;
  }
  ASSERT_EQ(got.size(), want.size());
  for (auto it = want.begin(); it != want.end(); ++it) {
    auto g = got.find(it.key());
    ASSERT_NE(g, got.end()) << "expected_tensors lacks " << it.key();
    EXPECT_EQ(g->second, it.value().get<std::vector<int64_t>>()) << it.key();
  }
}

TEST(ExpectedTensors, DeepseekV3HasNoIndexer) {
  ModelConfig cfg = builtin_model_config("deepseek-v3");
  int experts = 0;
  for (const TensorSpec& s : expected_tensors(cfg)) {
    EXPECT_EQ(s.name.find("indexer"), std::string::npos) << s.name;
    EXPECT_EQ(s.name.find("model.layers.61."), std::string::npos) << "MTP layer included: " << s.name;
    if (s.name.find(".mlp.experts.") != std::string::npos) ++experts;
  }
  EXPECT_EQ(experts, 58 * 256 * 3);
  // DeepSeek-V3 report: 671B parameters in the main model (685B with the 14B MTP module).
  EXPECT_NEAR(cfg.parameter_count() / 1e9, 671.0, 0.5);
}

TEST(LoadWeights, GoldenHostF32) {
  ModelConfig cfg = load_model_config(kGolden);
  Weights w = load_weights(cfg, kGolden, {Where::Host, DType::F32, false});
  RawFile raw(kGolden + "/model.safetensors");

  const WeightTensor& emb = w.get("model.embed_tokens.weight");
  EXPECT_EQ(emb.shape, (std::vector<int64_t>{512, 256}));
  for (int64_t i : {0, 1, 257, 512 * 256 - 1}) EXPECT_EQ(host_f32(emb, i), raw.bf16("model.embed_tokens.weight", i));

  const WeightTensor& norm = w.get("model.layers.2.self_attn.kv_a_layernorm.weight");
  EXPECT_EQ(norm.dtype, DType::F32);
  EXPECT_EQ(norm.shape, (std::vector<int64_t>{64}));
  for (int64_t i : {0, 63}) EXPECT_EQ(host_f32(norm, i), raw.bf16("model.layers.2.self_attn.kv_a_layernorm.weight", i));

  // Stacked experts: [E, I, H] and [E, H, I]; expert 5 row 3 col 7.
  const WeightTensor& up = w.get("model.layers.1.mlp.experts.up_proj.weight");
  EXPECT_EQ(up.shape, (std::vector<int64_t>{8, 128, 256}));
  EXPECT_EQ(host_f32(up, (5 * 128 + 3) * 256 + 7), raw.bf16("model.layers.1.mlp.experts.5.up_proj.weight", 3 * 256 + 7));
  const WeightTensor& down = w.get("model.layers.3.mlp.experts.down_proj.weight");
  EXPECT_EQ(down.shape, (std::vector<int64_t>{8, 256, 128}));
  EXPECT_EQ(host_f32(down, (7 * 256 + 255) * 128 + 127),
            raw.bf16("model.layers.3.mlp.experts.7.down_proj.weight", 255 * 128 + 127));
  EXPECT_FALSE(w.has("model.layers.1.mlp.experts.0.up_proj.weight"));
  EXPECT_TRUE(w.has("model.layers.1.mlp.gate.e_score_correction_bias"));
  EXPECT_TRUE(w.has("lm_head.weight"));
  EXPECT_EQ(w.stored_bytes(), w.logical_bytes());
  EXPECT_EQ(w.stored_bytes(), estimate_weight_bytes(cfg, {Where::Host, DType::F32, false}));
  // Every stored spec present.
  for (const TensorSpec& s : stored_tensor_specs(cfg)) {
    ASSERT_TRUE(w.has(s.name)) << s.name;
    EXPECT_EQ(w.get(s.name).shape, s.shape) << s.name;
  }
}

TEST(LoadWeights, GoldenBF16KeepsVectorsF32) {
  ModelConfig cfg = load_model_config(kGolden);
  Weights w = load_weights(cfg, kGolden, {Where::Host, DType::BF16, false});
  RawFile raw(kGolden + "/model.safetensors");
  const WeightTensor& q = w.get("model.layers.0.self_attn.q_b_proj.weight");
  EXPECT_EQ(q.dtype, DType::BF16);
  uint16_t b = static_cast<const uint16_t*>(q.data)[100];
  EXPECT_EQ(bf16_bits_to_float(b), raw.bf16("model.layers.0.self_attn.q_b_proj.weight", 100));
  EXPECT_EQ(w.get("model.norm.weight").dtype, DType::F32);
  EXPECT_EQ(w.get("model.layers.1.self_attn.indexer.k_norm.bias").dtype, DType::F32);
}

TEST(LoadWeights, SharedMlpAliasesExpertsNotRouter) {
  ModelConfig cfg = load_model_config(kGolden);
  WeightOptions opt{Where::Host, DType::F32, true};
  Weights w = load_weights(cfg, kGolden, opt);
  EXPECT_TRUE(w.shared_mlp());
  for (const char* p : {"experts.gate_proj.weight", "experts.up_proj.weight", "experts.down_proj.weight",
                        "shared_experts.gate_proj.weight", "shared_experts.down_proj.weight"}) {
    EXPECT_EQ(w.get(std::string("model.layers.3.mlp.") + p).data, w.get(std::string("model.layers.1.mlp.") + p).data)
        << p;
  }
  EXPECT_NE(w.get("model.layers.3.mlp.gate.weight").data, w.get("model.layers.1.mlp.gate.weight").data);
  EXPECT_NE(w.get("model.layers.3.mlp.gate.e_score_correction_bias").data,
            w.get("model.layers.1.mlp.gate.e_score_correction_bias").data);
  EXPECT_NE(w.get("model.layers.3.self_attn.o_proj.weight").data, w.get("model.layers.1.self_attn.o_proj.weight").data);
  EXPECT_LT(w.stored_bytes(), w.logical_bytes());
  EXPECT_EQ(w.stored_bytes(), estimate_weight_bytes(cfg, opt));
}

TEST(SharedMlpTarget, DenseLayersShareFirstDense) {
  ModelConfig cfg = builtin_model_config("glm5");
  EXPECT_EQ(shared_mlp_target(cfg, "model.layers.2.mlp.up_proj.weight"), "model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(shared_mlp_target(cfg, "model.layers.0.mlp.up_proj.weight"), "");
  EXPECT_EQ(shared_mlp_target(cfg, "model.layers.77.mlp.experts.down_proj.weight"),
            "model.layers.3.mlp.experts.down_proj.weight");
  EXPECT_EQ(shared_mlp_target(cfg, "model.layers.77.mlp.shared_experts.up_proj.weight"),
            "model.layers.3.mlp.shared_experts.up_proj.weight");
  EXPECT_EQ(shared_mlp_target(cfg, "model.layers.77.mlp.gate.weight"), "");
  EXPECT_EQ(shared_mlp_target(cfg, "model.layers.77.self_attn.o_proj.weight"), "");
  EXPECT_EQ(shared_mlp_target(cfg, "lm_head.weight"), "");
}

TEST(EstimateWeightBytes, Glm5FitsOneH200WithSharing) {
  ModelConfig cfg = builtin_model_config("glm5");
  const double gb = 1e9;
  double shared = double(estimate_weight_bytes(cfg, {Where::Device, DType::BF16, true})) / gb;
  double full = double(estimate_weight_bytes(cfg, {Where::Device, DType::BF16, false})) / gb;
  EXPECT_GT(shared, 30);
  EXPECT_LT(shared, 80);  // fits a 141 GB H200 with room for the KV pool
  EXPECT_GT(full, 1300);  // ~1.5 TB in BF16 (DESIGN.md)
  EXPECT_LT(full, 1600);
}

TEST(SyntheticWeights, DeterministicScalesAndSharing) {
  ModelConfig cfg = builtin_model_config("glm5-tiny");
  WeightOptions opt{Where::Host, DType::F32, true};
  Weights a = synthetic_weights(cfg, 7, opt);
  Weights b = synthetic_weights(cfg, 7, opt);
  Weights c = synthetic_weights(cfg, 8, opt);
  const std::string name = "model.layers.1.self_attn.q_b_proj.weight";
  const WeightTensor& t = a.get(name);
  const int64_t n = t.numel();
  EXPECT_EQ(0, std::memcmp(t.data, b.get(name).data, t.bytes()));
  EXPECT_NE(0, std::memcmp(t.data, c.get(name).data, t.bytes()));
  // Element i = scale * rng_normal(seed, name_stream(name), i), scale = 1/sqrt(in).
  const float scale = 1.f / std::sqrt(96.f);
  for (int64_t i : {int64_t(0), int64_t(1), n - 1})
    EXPECT_EQ(host_f32(t, i), std::fmaf(scale, rng_normal(7, name_stream(name), uint64_t(i)), 0.f));
  double sum2 = 0;
  for (int64_t i = 0; i < n; ++i) sum2 += double(host_f32(t, i)) * host_f32(t, i);
  EXPECT_NEAR(std::sqrt(sum2 / double(n)), scale, 0.05 * scale);
  // Norm weights centred at 1, bias at 0.
  const WeightTensor& nw = a.get("model.layers.0.input_layernorm.weight");
  double mean = 0;
  for (int64_t i = 0; i < nw.numel(); ++i) mean += host_f32(nw, i);
  EXPECT_NEAR(mean / double(nw.numel()), 1.0, 0.03);
  // Sharing: experts aliased, router distinct.
  EXPECT_EQ(a.get("model.layers.2.mlp.experts.up_proj.weight").data,
            a.get("model.layers.1.mlp.experts.up_proj.weight").data);
  EXPECT_NE(a.get("model.layers.2.mlp.gate.weight").data, a.get("model.layers.1.mlp.gate.weight").data);
  EXPECT_EQ(a.stored_bytes(), estimate_weight_bytes(cfg, opt));
}

TEST(SyntheticWeights, BF16IsRoundedF32) {
  ModelConfig cfg = builtin_model_config("glm5-tiny");
  Weights f = synthetic_weights(cfg, 3, {Where::Host, DType::F32, false});
  Weights h = synthetic_weights(cfg, 3, {Where::Host, DType::BF16, false});
  const std::string name = "model.layers.2.mlp.experts.down_proj.weight";
  const WeightTensor& tf = f.get(name);
  const WeightTensor& th = h.get(name);
  ASSERT_EQ(th.dtype, DType::BF16);
  for (int64_t i = 0; i < tf.numel(); i += 97)
    ASSERT_EQ(static_cast<const uint16_t*>(th.data)[i], float_to_bf16_bits(host_f32(tf, i))) << i;
}

}  // namespace
}  // namespace glm5
