// FP8 weights (WeightOptions.fp8_linear): a GLM-5-FP8-layout checkpoint written here (e4m3 `weight` +
// fp32 `weight_scale_inv` [ceil(out/128), ceil(in/128)] for every projection the FP8 checkpoints
// quantize; router, indexer weights_proj, kv_b, embeddings, lm_head and norms not) loads with codes and
// scales kept bit for bit (experts stacked), and dequantized when FP8 is not asked for; a BF16
// checkpoint is quantized per 128x128 block on load (scale = amax / 448); synthetic FP8 weights match
// the synthetic values to e4m3 precision.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "common/dtype.h"
#include "common/rng.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/synthetic.h"
#include "model/weights.h"
#include "tests/model/safetensors_writer.h"
#include "tests/shared_dir.h"

namespace glm5 {
namespace {

namespace fs = std::filesystem;

// Source value of element i of a golden tensor (whatever its dtype).
std::vector<float> values_of(const SafetensorsView& v) {
  std::vector<float> out(size_t(v.numel()));
  for (int64_t i = 0; i < v.numel(); ++i) out[size_t(i)] = read_element_as_float(v.dtype, v.data, i);
  return out;
}

// Per-expert HF name of stacked element: the stored name's source for expert x.
std::string expert_source(const std::string& stacked, int64_t x) {
  const std::string key = ".mlp.experts.";
  const size_t at = stacked.find(key);
  return stacked.substr(0, at + key.size()) + std::to_string(x) + "." + stacked.substr(at + key.size());
}

TEST(WeightsFp8, NameRule) {
  EXPECT_TRUE(fp8_weight_name("model.layers.3.self_attn.q_a_proj.weight"));
  EXPECT_TRUE(fp8_weight_name("model.layers.3.self_attn.kv_a_proj_with_mqa.weight"));
  EXPECT_TRUE(fp8_weight_name("model.layers.3.self_attn.o_proj.weight"));
  EXPECT_TRUE(fp8_weight_name("model.layers.3.self_attn.indexer.wq_b.weight"));
  EXPECT_TRUE(fp8_weight_name("model.layers.3.self_attn.indexer.wk.weight"));
  EXPECT_TRUE(fp8_weight_name("model.layers.3.mlp.experts.17.down_proj.weight"));
  EXPECT_TRUE(fp8_weight_name("model.layers.3.mlp.shared_experts.gate_proj.weight"));
  EXPECT_FALSE(fp8_weight_name("model.layers.3.self_attn.kv_b_proj.weight"));
  EXPECT_FALSE(fp8_weight_name("model.layers.3.self_attn.indexer.weights_proj.weight"));
  EXPECT_FALSE(fp8_weight_name("model.layers.3.mlp.gate.weight"));
  EXPECT_FALSE(fp8_weight_name("model.embed_tokens.weight"));
  EXPECT_FALSE(fp8_weight_name("lm_head.weight"));
}

TEST(WeightsFp8, Fp8CheckpointLoadsBitExactAndDequantizes) {
  const std::string golden = test::golden_dir();
  ModelConfig cfg = load_model_config(golden + "/config.json");
  SafetensorsFile src(golden + "/model.safetensors");
  // Build the FP8 checkpoint: random block scales, codes = e4m3(x / scale).
  test::RawTensors ts;
  std::map<std::string, std::pair<std::vector<uint8_t>, std::vector<float>>> written;
  uint64_t seed = 1;
  for (const auto& [name, v] : src.views()) {
    std::vector<float> x = values_of(v);
    if (!fp8_weight_name(name) || v.shape.size() != 2) {
      std::vector<uint8_t> bytes(x.size() * 4);
      std::memcpy(bytes.data(), x.data(), bytes.size());
      ts[name] = {"F32", v.shape, bytes};
      continue;
    }
    const int64_t rows = v.shape[0], cols = v.shape[1], rb = (rows + 127) / 128, cb = (cols + 127) / 128;
    std::vector<float> scales(size_t(rb * cb));
    for (size_t b = 0; b < scales.size(); ++b) scales[b] = (0.01f + rng_uniform(7, seed, b)) / 448.f;
    std::vector<uint8_t> codes(x.size());
    for (int64_t i = 0; i < int64_t(x.size()); ++i)
      codes[size_t(i)] = float_to_e4m3_bits(x[size_t(i)] / scales[size_t((i / cols / 128) * cb + (i % cols) / 128)]);
    std::vector<uint8_t> sb(scales.size() * 4);
    std::memcpy(sb.data(), scales.data(), sb.size());
    ts[name] = {"F8_E4M3", v.shape, codes};
    ts[name + "_scale_inv"] = {"F32", {rb, cb}, sb};
    written[name] = {codes, scales};
    ++seed;
  }
  const fs::path dir = fs::path(::testing::TempDir()) / "glm5_fp8_ckpt";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(golden + "/config.json", dir / "config.json");
  test::write_safetensors((dir / "model.safetensors").string(), ts);

  WeightOptions fo;
  fo.fp8_linear = true;
  Weights w8 = load_weights(cfg, dir.string(), fo);
  Weights wf = load_weights(cfg, dir.string(), WeightOptions{});
  int fp8_tensors = 0;
  for (const auto& [name, t] : w8.tensors()) {
    if (!fp8_weight_name(name) || t.shape.size() < 2) {
      EXPECT_EQ(t.dtype, DType::F32) << name;
      continue;
    }
    ASSERT_EQ(t.dtype, DType::F8_E4M3) << name;
    ASSERT_NE(t.scale_inv, nullptr) << name;
    ++fp8_tensors;
    const int64_t mats = t.shape.size() == 3 ? t.shape[0] : 1, per = t.numel() / mats;
    const int64_t per_s = t.scale_numel() / mats;
    const uint8_t* codes = static_cast<const uint8_t*>(t.data);
    const float* deq = static_cast<const float*>(wf.get(name).data);
    for (int64_t x = 0; x < mats; ++x) {
      const auto& [wc, ws] = written.at(mats > 1 ? expert_source(name, x) : name);
      ASSERT_EQ(0, std::memcmp(codes + x * per, wc.data(), size_t(per))) << name << " expert " << x;
      ASSERT_EQ(0, std::memcmp(t.scale_inv + x * per_s, ws.data(), ws.size() * 4)) << name << " scales, expert " << x;
      const int64_t cols = t.shape.back(), cb = (cols + 127) / 128;
      for (int64_t i = 0; i < per; i += 97) {  // the non-FP8 load dequantizes code x scale
        const float want = e4m3_bits_to_float(wc[size_t(i)]) * ws[size_t((i / cols / 128) * cb + (i % cols) / 128)];
        ASSERT_EQ(deq[x * per + i], want) << name << " element " << i;
      }
    }
  }
  // Per layer: q_a, q_b, kv_a, o_proj (+ indexer wq_b, wk where present) and the MLP / experts / shared.
  EXPECT_GE(fp8_tensors, 4 * cfg.num_hidden_layers);
  EXPECT_LT(w8.stored_bytes(), wf.stored_bytes() / 2);
}

TEST(WeightsFp8, Bf16CheckpointQuantizedPerBlockOnLoad) {
  const std::string golden = test::golden_dir();
  ModelConfig cfg = load_model_config(golden + "/config.json");
  WeightOptions fo;
  fo.fp8_linear = true;
  Weights w8 = load_weights(cfg, golden, fo);
  SafetensorsFile src(golden + "/model.safetensors");
  const WeightTensor& t = w8.get("model.layers.0.self_attn.q_b_proj.weight");
  ASSERT_EQ(t.dtype, DType::F8_E4M3);
  std::vector<float> x = values_of(src.get("model.layers.0.self_attn.q_b_proj.weight"));
  const int64_t rows = t.shape[0], cols = t.shape[1], cb = (cols + 127) / 128;
  std::vector<float> amax(size_t(((rows + 127) / 128) * cb), 0.f);
  for (int64_t i = 0; i < rows * cols; ++i) {
    float& a = amax[size_t((i / cols / 128) * cb + (i % cols) / 128)];
    a = std::max(a, std::fabs(x[size_t(i)]));
  }
  const uint8_t* codes = static_cast<const uint8_t*>(t.data);
  for (size_t b = 0; b < amax.size(); ++b) EXPECT_FLOAT_EQ(t.scale_inv[b], amax[b] / 448.f) << "block " << b;
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float s = t.scale_inv[size_t((i / cols / 128) * cb + (i % cols) / 128)];
    const float got = e4m3_bits_to_float(codes[size_t(i)]) * s;
    ASSERT_LE(std::fabs(got - x[size_t(i)]), std::fabs(x[size_t(i)]) / 16.f + s / 512.f) << "element " << i;
  }
}

TEST(WeightsFp8, SyntheticMatchesValuesToE4m3Precision) {
  ModelConfig cfg = resolve_model_config("glm5-tiny");
  WeightOptions fo;
  fo.fp8_linear = true;
  Weights w8 = synthetic_weights(cfg, 99, fo);
  Weights wf = synthetic_weights(cfg, 99, WeightOptions{});
  int checked = 0;
  for (const auto& [name, t] : w8.tensors()) {
    if (t.dtype != DType::F8_E4M3) continue;
    ++checked;
    const float* ref = static_cast<const float*>(wf.get(name).data);
    const uint8_t* codes = static_cast<const uint8_t*>(t.data);
    const int64_t cols = t.shape.back(), rows = t.shape[t.shape.size() - 2];
    const int64_t rb = (rows + 127) / 128, cb = (cols + 127) / 128;
    std::set<float> distinct_scales(t.scale_inv, t.scale_inv + t.scale_numel());
    if (t.scale_numel() > 1) EXPECT_GT(distinct_scales.size(), 1u) << name;
    for (int64_t i = 0; i < t.numel(); i += 13) {
      const int64_t e = i / (rows * cols), r = (i / cols) % rows, c = i % cols;
      const float s = t.scale_inv[size_t((e * rb + r / 128) * cb + c / 128)];
      const float got = e4m3_bits_to_float(codes[size_t(i)]) * s;
      ASSERT_LE(std::fabs(got - ref[i]), std::fabs(ref[i]) / 16.f + s / 512.f) << name << " element " << i;
    }
  }
  EXPECT_GE(checked, 4 * cfg.num_hidden_layers);
}

}  // namespace
}  // namespace glm5
